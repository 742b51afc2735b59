"""Level 3: pre-norm transformer block: multi-head self-attention and a GELU MLP, both residual."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """x + attn(ln1(x)), then x + mlp(ln2(x)); attention written out with an explicit softmax."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, mlp_ratio * d_model)
        self.fc2 = nn.Linear(mlp_ratio * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        qkv = self.qkv(self.ln1(x))
        qkv = qkv.view(batch, seq, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        weights = torch.softmax(scores, dim=-1)
        attn = torch.matmul(weights, v).transpose(1, 2).reshape(batch, seq, d_model)
        x = x + self.proj(attn)
        h = F.gelu(self.fc1(self.ln2(x)))
        x = x + self.fc2(h)
        return x


batch_size = 2
seq_len = 128
d_model = 256
n_heads = 4
mlp_ratio = 4


def get_inputs():
    x = torch.randn(batch_size, seq_len, d_model)
    return [x]


def get_init_inputs():
    return [d_model, n_heads, mlp_ratio]
