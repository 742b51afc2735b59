"""Level 3: RMSNorm followed by a SwiGLU gated MLP with a residual connection."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """x + down(silu(gate(rmsnorm(x))) * up(rmsnorm(x))), RMSNorm with a learned weight."""

    def __init__(self, d_model: int, d_hidden: int, eps: float):
        super().__init__()
        self.norm_weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps
        self.gate = nn.Linear(d_model, d_hidden, bias=False)
        self.up = nn.Linear(d_model, d_hidden, bias=False)
        self.down = nn.Linear(d_hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        h = x * rms * self.norm_weight
        h = F.silu(self.gate(h)) * self.up(h)
        return x + self.down(h)


batch_size = 4
seq_len = 128
d_model = 256
d_hidden = 688
eps = 1e-6


def get_inputs():
    x = torch.randn(batch_size, seq_len, d_model)
    return [x]


def get_init_inputs():
    return [d_model, d_hidden, eps]
