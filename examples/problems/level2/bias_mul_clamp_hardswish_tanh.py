"""Level 2: elementwise chain: per-channel bias add and scale, clamp, hardswish, tanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = tanh(hardswish(clamp((x + bias) * scale, clamp_min, clamp_max))) with bias and scale of shape (C, 1, 1)."""

    def __init__(self, channels: int, clamp_min: float, clamp_max: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.scale = nn.Parameter(torch.rand(channels, 1, 1) + 0.5)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.bias
        x = x * self.scale
        x = torch.clamp(x, min=self.clamp_min, max=self.clamp_max)
        x = F.hardswish(x)
        x = torch.tanh(x)
        return x


batch_size = 8
channels = 64
height = 64
width = 64
clamp_min = -3.0
clamp_max = 3.0


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, clamp_min, clamp_max]
