"""Level-1 style: C = A @ B with a small inner dimension (M = N = 32768, K = 64; C is 4.3 GB).

After KernelBench level1/7_Matmul_with_small_K_dimension_ (its current sizes)."""
import torch
import torch.nn as nn

M = N = 16384 * 2
K = 32 * 2


class Model(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
