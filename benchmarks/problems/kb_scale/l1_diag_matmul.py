"""Level-1 style: diag(A) @ B at KernelBench's current size (N = M = 4096)."""
import torch
import torch.nn as nn

N = 4096
M = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


def get_inputs():
    return [torch.rand(N), torch.rand(N, M)]


def get_init_inputs():
    return []
