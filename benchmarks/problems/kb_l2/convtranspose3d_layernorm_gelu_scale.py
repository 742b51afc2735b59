"""Level-2 style: ConvTranspose3d -> LayerNorm over the last dim -> GELU -> * constant.

After KernelBench level2/34_ConvTranspose3d_LayerNorm_GELU_Scaling (its current sizes; as there, LayerNorm(64)
normalizes the last dim, which is W' = 64)."""
import torch
import torch.nn as nn

batch_size = 32
in_channels, out_channels = 32, 64
D, H, W = 16, 32, 32
kernel_size, stride, padding = 4, 2, 1
bias, eps, scaling_factor = True, 1e-5, 1.0


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True, eps=1e-5,
                 scaling_factor=1.0):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.layer_norm = nn.LayerNorm(out_channels, eps=eps)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.layer_norm(self.conv_transpose(x))
        return torch.nn.functional.gelu(x) * self.scaling_factor


def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias, eps, scaling_factor]
