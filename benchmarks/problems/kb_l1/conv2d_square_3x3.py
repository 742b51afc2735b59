"""Level-1 style: Conv2d 16 -> 128 channels, 3x3 kernel, no bias, on 16 x 16 x 1024 x 1024 (output 8.6 GB).

After KernelBench level1/63_conv_standard_2D__square_input__square_kernel (its current sizes)."""
import torch
import torch.nn as nn

batch_size = 16
in_channels, out_channels = 16, 128
kernel_size = 3
height = width = 1024


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), stride=stride,
                                padding=padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
