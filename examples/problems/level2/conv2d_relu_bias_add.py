"""Level 2: Conv2d, then ReLU, then a per-channel bias add."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution followed by ReLU and a learned per-channel bias of shape (C, 1, 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x


batch_size = 8
in_channels = 16
out_channels = 32
height = 64
width = 64
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
