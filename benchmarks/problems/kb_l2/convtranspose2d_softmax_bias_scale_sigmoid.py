"""Level-2 style: ConvTranspose2d -> softmax over channels -> + bias -> * scale -> sigmoid.

After KernelBench level2/91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid (its current sizes)."""
import torch
import torch.nn as nn

batch_size = 128
in_channels, out_channels = 64, 128
height = width = 64
kernel_size, stride, padding, output_padding = 4, 2, 1, 1
bias_shape = (out_channels, 1, 1)
scaling_factor = 2.0


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape,
                 scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = torch.softmax(self.conv_transpose(x), dim=1)
        return torch.sigmoid((x + self.bias) * self.scaling_factor)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scaling_factor]
