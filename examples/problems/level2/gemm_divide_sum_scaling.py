"""Level 2: GEMM with a weight parameter, divide by 2, sum over features, scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = scaling_factor * sum_j (x @ W^T / 2)[:, j], returned with shape (batch, 1)."""

    def __init__(self, input_size: int, hidden_size: int, scaling_factor: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size) * 0.02)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.matmul(x, self.weight.T)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)
        x = x * self.scaling_factor
        return x


batch_size = 256
input_size = 1024
hidden_size = 512
scaling_factor = 1.5


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
