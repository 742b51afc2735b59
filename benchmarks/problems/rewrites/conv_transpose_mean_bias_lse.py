"""Level-2 style (the structure of KernelBench level2/42 ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply,
at level2/44's sizes: batch 16, 64 -> 128 channels, 128 x 128, kernel 3): ConvTranspose2d, global average pool (mean
over H, W, keepdim), + a per-channel bias (C, 1, 1), logsumexp over the channels, sum over H, W, * 10.
drop-redundant drops the sum over the size-1 dims, fold-affine folds the bias through the mean, conv-to-window-sums
replaces the transposed convolution and its mean by window sums of the input and one [128, 576] GEMM."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 128
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv_transpose(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        x = x + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.sum(x, dim=(2, 3))
        return x * 10.0


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
