"""Level-2 style: AvgPool3d -> ConvTranspose3d -> clamp -> softmax over the flattened spatial dims -> * scale.

After KernelBench level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply (its current sizes)."""
import torch
import torch.nn as nn

batch_size = 32
in_channels, out_channels = 32, 64
depth, height, width = 32, 64, 64
kernel_size, stride, padding, output_padding = 3, 2, 1, 1
pool_kernel_size = 2
clamp_min, clamp_max = 0.0, 1.0


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size,
                 clamp_min, clamp_max):
        super().__init__()
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.clamp_min, self.clamp_max = clamp_min, clamp_max
        self.scale = nn.Parameter(torch.ones(1, out_channels, 1, 1, 1))

    def forward(self, x):
        x = self.conv_transpose(self.avg_pool(x))
        x = torch.clamp(x, self.clamp_min, self.clamp_max)
        b, c, d, h, w = x.shape
        x = torch.softmax(x.view(b, c, -1), dim=2).view(b, c, d, h, w)
        return x * self.scale


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size, clamp_min,
            clamp_max]
