"""Level-2 style: ConvTranspose3d -> softmax over channels -> sigmoid.

After KernelBench level2/49_ConvTranspose3d_Softmax_Sigmoid (its current sizes)."""
import torch
import torch.nn as nn

batch_size = 16
in_channels, out_channels = 32, 64
D, H, W = 16, 32, 32
kernel_size, stride, padding, output_padding = 3, 2, 1, 1


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding, bias=bias)
        self.softmax = nn.Softmax(dim=1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        return self.sigmoid(self.softmax(self.conv_transpose(x)))


def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding]
