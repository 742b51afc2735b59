"""Level 1: LayerNorm over the hidden dimension of a (batch, seq, hidden) tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension, with learned weight and bias."""

    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 16
seq_len = 256
hidden = 1024


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [hidden]
