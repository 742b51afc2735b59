"""Level-1 style: 2D average pooling, kernel 11, on a 16 x 64 x 1024 x 1024 input (4.3 GB)."""
import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 1024
width = 1024
kernel_size = 11


class Model(nn.Module):
    def __init__(self, kernel_size: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size]
