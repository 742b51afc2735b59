"""Level 1: sum reduction over one dimension of a 3-D tensor, keeping the dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Sums over dimension `dim` with keepdim=True."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 128
dim1 = 256
dim2 = 256
reduce_dim = 1


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
