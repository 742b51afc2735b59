"""Level 1: 2-D convolution with a square 3x3 kernel."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Standard 2-D convolution (stride 1, no padding) with bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 8
in_channels = 16
out_channels = 32
height = 64
width = 64
kernel_size = 3


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
