"""Level-1 style: ConvTranspose1d 32 -> 64 channels, kernel 3, stride 2, padding 1, dilation 2, on a 131072-long
sequence (batch 16).

After KernelBench level1/79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__
(its current sizes)."""
import torch
import torch.nn as nn

batch_size = 16
in_channels, out_channels = 32, 64
kernel_size = 3
length = 131072
stride, padding, dilation = 2, 1, 2


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride,
                                                   padding=padding, dilation=dilation, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d_transpose(x)


def get_inputs():
    return [torch.rand(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]
