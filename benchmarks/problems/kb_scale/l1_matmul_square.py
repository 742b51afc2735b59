"""Level-1 style: square matrix multiplication, N = 4096 (KernelBench: N = 2048 * 2)."""
import torch
import torch.nn as nn

N = 2048 * 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
