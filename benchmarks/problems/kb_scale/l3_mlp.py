"""Level-3 style: a 3-layer MLP (batch 128, 16384 -> 32768 -> 32768 -> 16384), 8 GB of float32 weights."""
import torch
import torch.nn as nn

batch_size = 128
input_size = 16384
layer_sizes = [32768, 32768]
output_size = 16384


class Model(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers += [nn.Linear(current, size), nn.ReLU()]
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
