"""Level 1: elementwise ReLU on a 2-D activation tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies ReLU elementwise: y = max(x, 0)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 64
dim = 65536


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
