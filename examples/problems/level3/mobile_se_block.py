"""Level 3: MobileNetV3-style inverted residual block with hardswish and squeeze-and-excitation."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """1x1 expand -> hardswish -> 3x3 depthwise -> hardswish -> SE gate (explicit sigmoid) -> 1x1 project, plus identity."""

    def __init__(self, channels: int, expansion: int, se_reduction: int):
        super().__init__()
        hidden = channels * expansion
        self.expand = nn.Conv2d(channels, hidden, kernel_size=1)
        self.depthwise = nn.Conv2d(hidden, hidden, kernel_size=3, padding=1, groups=hidden)
        self.se_reduce = nn.Conv2d(hidden, hidden // se_reduction, kernel_size=1)
        self.se_expand = nn.Conv2d(hidden // se_reduction, hidden, kernel_size=1)
        self.project = nn.Conv2d(hidden, channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.hardswish(self.expand(x))
        h = F.hardswish(self.depthwise(h))
        s = torch.mean(h, dim=(2, 3), keepdim=True)
        s = torch.relu(self.se_reduce(s))
        s = self.se_expand(s)
        s = 1.0 / (1.0 + torch.exp(-s))  # hand-written sigmoid gate
        h = h * s
        return x + self.project(h)


batch_size = 8
channels = 32
expansion = 4
se_reduction = 4
height = 32
width = 32


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, expansion, se_reduction]
