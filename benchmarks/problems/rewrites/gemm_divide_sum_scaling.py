"""Level-2 style (KernelBench 2/14 Gemm_Divide_Sum_Scaling at its current size): x @ W.T / 2, summed over the 8192
features, * 1.5 (batch 1024, 8192 -> 8192). fold-affine then gemm-to-gemv: one GEMV with W.sum(0) * 0.75."""
import torch
import torch.nn as nn

batch_size = 1024
input_size = 8192
hidden_size = 8192
scaling_factor = 1.5


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size) * 0.02)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = torch.matmul(x, self.weight.T)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)
        return x * self.scaling_factor


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
