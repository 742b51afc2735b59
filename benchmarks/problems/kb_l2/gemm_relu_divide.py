"""Level-2 style: Linear -> ReLU -> divide by a constant.

After KernelBench level2/63_Gemm_ReLU_Divide (its current sizes)."""
import torch
import torch.nn as nn

batch_size = 1024
in_features = out_features = 8192
divisor = 2.0


class Model(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return torch.relu(self.linear(x)) / self.divisor


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
