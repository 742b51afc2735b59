"""Level 2: Linear layer, then GELU, then multiplication by a scalar."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = gelu(x @ W^T + b) * scale."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = F.gelu(x)
        x = x * self.scale
        return x


batch_size = 256
in_features = 1024
out_features = 1024
scale = 0.5


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scale]
