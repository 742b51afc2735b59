"""Level 3: multi-layer perceptron with ReLU between linear layers."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> ReLU repeated for each hidden size, then a final Linear to output_size."""

    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 128
input_size = 1024
layer_sizes = [1024, 512, 256]
output_size = 10


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
