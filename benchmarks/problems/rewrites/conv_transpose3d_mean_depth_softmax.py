"""Level-2 style (the structure of KernelBench level2/13 ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling at a moderate
size): ConvTranspose3d 16 -> 64 (batch 16, 16 x 64 x 64, kernel 3, stride 2, padding 1), mean over the depth
(keepdim), + a bias (1, C, 1, 1, 1), softmax over the channels, tanh, * 2. fold-affine folds the bias through the
mean; conv-to-window-sums sums the input over the depth windows and runs a ConvTranspose2d with 16 x 3 input channels
over height and width instead of the 3-D one."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 16
out_channels = 64
depth, height, width = 16, 64, 64
kernel_size = 3
stride = 2
padding = 1
scaling_factor = 2.0


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.bias = nn.Parameter(torch.randn(1, out_channels, 1, 1, 1))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x.mean(dim=2, keepdim=True)
        x = x + self.bias
        x = torch.softmax(x, dim=1)
        x = torch.tanh(x)
        return x * self.scaling_factor


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, scaling_factor]
