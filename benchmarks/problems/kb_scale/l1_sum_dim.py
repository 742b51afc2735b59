"""Level-1 style: sum over dim 1 of a 128 x 4096 x 4095 float32 input (8.6 GB), keepdim."""
import torch
import torch.nn as nn

batch_size = 128
dim1 = 4096
dim2 = 4095
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.rand(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
