"""Level-2 style (KernelBench 2/ConvTranspose3d_Scale_BiasAdd... family at a moderate size): ConvTranspose3d 32 -> 64
(batch 16, 16 x 32 x 32, stride 2), * scale, + a per-channel bias (C, 1, 1, 1), * 0.5. fold-affine: one transposed
convolution."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 32
out_channels = 64
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
scale = 1.7


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, 1))
        self.scale = scale

    def forward(self, x):
        x = self.conv_transpose(x) * self.scale
        x = x + self.bias
        return x * 0.5


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, scale]
