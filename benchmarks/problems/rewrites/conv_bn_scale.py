"""Level-2 style (KernelBench 2/73 Conv2d_BatchNorm_Scaling at its current size): Conv2d 8 -> 64, 3x3 on 128 x 128
images (batch 128), BatchNorm2d in eval mode, * 2.0. fold-bn then fold-affine: one convolution."""
import torch
import torch.nn as nn

batch_size = 128
in_channels = 8
out_channels = 64
height = width = 128
kernel_size = 3
scaling_factor = 2.0


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        return x * self.scaling_factor


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scaling_factor]
