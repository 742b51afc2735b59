"""Level 2: Linear layer, then sigmoid, then a sum over the feature dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = sum_j sigmoid(x @ W^T + b)[:, j], returned with shape (batch, 1)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = torch.sigmoid(x)
        x = torch.sum(x, dim=1, keepdim=True)
        return x


batch_size = 256
input_size = 1024
hidden_size = 1024


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, hidden_size]
