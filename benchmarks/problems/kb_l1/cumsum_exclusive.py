"""Level-1 style: exclusive cumulative sum along dim 1 of a 32768 x 32768 input (4.3 GB).

After KernelBench level1/92_cumsum_exclusive (its current sizes, and its forward as written: the zero column is
prepended along `dim`, then `[:-1]` drops the last ROW, so the output is 32767 x 32769)."""
import torch
import torch.nn as nn

batch_size = 32768
input_shape = (32768,)
dim = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        return torch.cumsum(torch.cat((zeros, x), dim=self.dim)[:-1], dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, *input_shape)]


def get_init_inputs():
    return [dim]
