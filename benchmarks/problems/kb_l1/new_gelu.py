"""Level-1 style: the tanh-approximation GELU of minGPT written as PyTorch ops, on an 8192 x 8192 input.

After KernelBench level1/88_MinGPTNewGelu (its current sizes)."""
import math

import torch
import torch.nn as nn

batch_size = 8192
dim = 8192


class Model(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
