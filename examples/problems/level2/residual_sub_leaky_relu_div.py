"""Level 2: elementwise chain on two inputs: subtract, leaky_relu, per-channel multiply, hardtanh, divide."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = hardtanh(leaky_relu(x - residual, slope) * weight, -1, 1) / divisor, weight of shape (C, 1, 1)."""

    def __init__(self, channels: int, negative_slope: float, divisor: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, 1, 1))
        self.negative_slope = negative_slope
        self.divisor = divisor

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x - residual
        x = F.leaky_relu(x, negative_slope=self.negative_slope)
        x = x * self.weight
        x = F.hardtanh(x, min_val=-1.0, max_val=1.0)
        x = x / self.divisor
        return x


batch_size = 8
channels = 64
height = 64
width = 64
negative_slope = 0.2
divisor = 2.0


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    residual = torch.randn(batch_size, channels, height, width)
    return [x, residual]


def get_init_inputs():
    return [channels, negative_slope, divisor]
