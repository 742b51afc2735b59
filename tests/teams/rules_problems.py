"""Small KernelBench-format problems for the rules team's tests (sources, so they travel like user uploads)."""

from __future__ import annotations

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"

CONV_CHAIN = HEADER + '''class Model(nn.Module):
    def __init__(self, in_c, out_c, k, bias_shape, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_c, out_c, k)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.act = nn.GELU()
        self.scale = scale

    def forward(self, x):
        x = self.conv(x)
        x = x + self.bias
        x = self.act(x)
        x = x * self.scale
        x = torch.clamp(x, min=-0.5, max=1.0)
        return x.sum(dim=1) * 2 + 1


def get_inputs():
    return [torch.randn(2, 3, 12, 12)]


def get_init_inputs():
    return [3, 8, 3, (8, 1, 1), 2.0]
'''

# Every fusable op once, with full, scalar, per-channel (dim 1) and last-dim operands, two regions.
MANY_OPS = HEADER + '''class Model(nn.Module):
    def __init__(self, channels, width):
        super().__init__()
        self.cbias = nn.Parameter(torch.randn(channels, 1, 1))
        self.wbias = nn.Parameter(torch.randn(width))
        self.gain = nn.Parameter(torch.rand(1) + 0.5)
        self.act = nn.Hardswish()

    def forward(self, x, residual):
        y = (x - residual) * self.cbias + self.wbias
        y = F.leaky_relu(y, 0.1) / 1.5
        y = F.gelu(y) + F.gelu(y, approximate="tanh")
        y = torch.sigmoid(y) * torch.tanh(y) + F.silu(y) - F.mish(y)
        y = F.hardtanh(y, -2.0, 2.0) + F.relu6(y) + self.act(y) + F.hardsigmoid(y)
        y = F.softplus(y) + F.elu(y) + torch.relu(-y) * self.gain
        y = torch.clamp(y, max=3.0).abs() + torch.exp(-y.abs()) + torch.sqrt(y.abs() + 1) + torch.log(y.abs() + 1)
        y = torch.rsqrt(y * y + 1) + torch.erf(y) + y ** 2 + torch.maximum(y, residual) - torch.minimum(y, x)
        z = torch.tanh(y.mean(dim=1, keepdim=True)) * 3  # a middle-dim reduction with an epilogue
        w = (torch.sigmoid(x) * self.wbias).sum(-1, keepdim=True) / 2  # a last-dim one with a prologue
        return z - y + w


def get_inputs():
    return [torch.randn(2, 4, 5, 6), torch.randn(2, 4, 5, 6)]


def get_init_inputs():
    return [4, 6]
'''

LINEAR_SWISH = HEADER + '''class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)
        self.bias = nn.Parameter(torch.randn(n_out))

    def forward(self, x):
        x = self.linear(x) + self.bias
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16, 8]
'''

# GEMMs with epilogues (search.teams.rules.analysis.gemms): F.linear -> tanh-GELU (cuBLASLt-able) -> scale, then a matmul
# with a [K, N] parameter -> per-column subtract -> ReLU -> per-row scale; sizes off the 16-wide tiles.
GEMM_EPILOGUES = HEADER + '''class Model(nn.Module):
    def __init__(self, n_in, n_hidden, n_out, batch):
        super().__init__()
        self.fc = nn.Linear(n_in, n_hidden)
        self.w = nn.Parameter(torch.randn(n_hidden, n_out) * 0.2)
        self.col = nn.Parameter(torch.randn(n_out) * 0.1)
        self.row_scale = nn.Parameter(torch.rand(batch, 1) + 0.5)

    def forward(self, x):
        h = F.gelu(F.linear(x, self.fc.weight, self.fc.bias), approximate="tanh") * 0.5
        y = torch.matmul(h, self.w)
        return torch.relu(y - self.col) * self.row_scale


def get_inputs():
    return [torch.randn(37, 45)]


def get_init_inputs():
    return [45, 40, 33, 37]
'''

# Launch-bound (Facts.launch_bound): 24 ops on [8, 32] tensors, each about one kernel launch on a GPU.
LAUNCH_BOUND = HEADER + '''class Model(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.sigmoid(torch.relu(layer(x)) * 0.5 + 0.1) - 0.2
        return x


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32, 4]
'''

MATMUL = HEADER + '''class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(8, 8), torch.randn(8, 8)]


def get_init_inputs():
    return []
'''

DATA_DEPENDENT = HEADER + '''class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return torch.relu(x) * 2
        return x


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
'''

OUTER_BROADCAST = HEADER + '''class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b) * 2


def get_inputs():
    return [torch.randn(8, 1), torch.randn(1, 8)]


def get_init_inputs():
    return []
'''

INPLACE_SHARED = HEADER + '''class Model(nn.Module):
    def forward(self, x):
        y = x * 2
        z = F.relu(y, inplace=True)
        return (z + 1) * y


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
'''


def single_op(expr: str, shape: str, init: str = "", init_inputs: str = "[]") -> str:
    """A problem whose forward(x) returns expr, built in the __init__ body init (e.g. a module)."""
    ctor = f"    def __init__(self):\n        super().__init__()\n{init}\n" if init else ""
    return HEADER + f'''class Model(nn.Module):
{ctor}    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn{shape}]


def get_init_inputs():
    return {init_inputs}
'''


# Level 1's single library ops, at test sizes: each must get a kernel of the team's own.
SOFTMAX = single_op("torch.softmax(x, dim=1)", "(8, 300)")
LAYERNORM = single_op("self.ln(x)", "(2, 5, 96)", "        self.ln = nn.LayerNorm(96)")
SUM_MIDDLE = single_op("torch.sum(x, dim=1, keepdim=True)", "(4, 24, 40)")
RELU = single_op("torch.relu(x)", "(16, 200)")

# SOFTMAX, SUM_MIDDLE and RELU side by side, each on an input of its own (the harness's fuzzing varies each input):
# one build of the three writers' kernels.
SINGLE_OPS = HEADER + '''class Model(nn.Module):
    def forward(self, x, y, z):
        return torch.softmax(x, dim=1), torch.sum(y, dim=1, keepdim=True), torch.relu(z)


def get_inputs():
    return [torch.randn(8, 300), torch.randn(4, 24, 40), torch.randn(16, 200)]


def get_init_inputs():
    return []
'''

# Every row-op spelling, with prologues and epilogues, and the bare reductions; outputs as a tuple so
# no op is fused into another's prologue or epilogue.
ROW_OPS = HEADER + '''class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln = nn.LayerNorm(width, eps=1e-3)
        self.plain = nn.LayerNorm(width, elementwise_affine=False)
        self.rms = nn.RMSNorm(width)
        self.sm = nn.Softmax(dim=-1)
        self.w = nn.Parameter(torch.rand(width) + 0.5)
        self.b = nn.Parameter(torch.randn(width))
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-1.0, 1.0)
            self.rms.weight.uniform_(0.5, 1.5)

    def forward(self, x, residual):
        a = torch.softmax(x * 0.125, dim=-1) * 2.0
        b = F.log_softmax(x, dim=2)
        c = F.gelu(self.ln(x + residual))
        d = F.layer_norm(x, (40,), self.w, None, 1e-6)
        e = self.plain(x * 3.0 + 100.0)  # a large row offset: the one-pass variance must not cancel
        f = self.rms(torch.tanh(x))
        g = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
        h = self.sm(residual)
        i = torch.sum(x, dim=1, keepdim=True)
        j = x.mean(-1)
        k = torch.amax(x, dim=0)
        m = torch.max(residual, 1).values
        n = torch.relu(residual)
        return a, b, c, d, e, f, g, h, i, j, k, m, n


def get_inputs():
    return [torch.randn(3, 5, 40), torch.randn(3, 5, 40)]


def get_init_inputs():
    return [40]
'''

# Rows longer than one Triton block (the looped passes) and a prologue with a per-row constant.
LONG_ROWS = HEADER + '''class Model(nn.Module):
    def __init__(self, rows, width):
        super().__init__()
        self.row_bias = nn.Parameter(torch.randn(rows, 1))
        self.ln = nn.LayerNorm(width)

    def forward(self, x):
        return torch.softmax(x + self.row_bias, dim=-1), self.ln(x), torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(3, 17000)]


def get_init_inputs():
    return [3, 17000]
'''
