"""Level-2 style: ConvTranspose2d -> + constant -> min with 0 -> GELU -> * constant.

After KernelBench level2/93_ConvTranspose2d_Add_Min_GELU_Multiply (its current sizes)."""
import torch
import torch.nn as nn

batch_size = 128
in_channels, out_channels = 64, 128
height = width = 64
kernel_size, stride = 4, 2
add_value, multiply_value = 0.5, 2.0


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, add_value, multiply_value):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.add_value = add_value
        self.multiply_value = multiply_value

    def forward(self, x):
        x = self.conv_transpose(x) + self.add_value
        x = torch.min(x, torch.tensor(0.0, device=x.device))
        return torch.nn.functional.gelu(x) * self.multiply_value


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, add_value, multiply_value]
