"""Level-1 style: an elementwise op on a 4096 x 393216 float32 input (6.4 GB), KernelBench's current size."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 393216


class Model(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
