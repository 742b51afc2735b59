"""Small KernelBench level-2-style problems for the exact rewrites (search.teams.rules.rewrites.passes): one per rewrite that
applies (named after it), and one per rewrite whose precondition fails (NO_*: the rewrite must not fire)."""

from __future__ import annotations

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def problem(init: str, forward: str, inputs: str, init_inputs: str = "[]", signature: str = "x") -> str:
    return HEADER + f'''class Model(nn.Module):
    def __init__(self, *args):
        super().__init__()
{init}

    def forward(self, {signature}):
{forward}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return {init_inputs}
'''


# Gemm -> multiply -> add a per-feature bias -> subtract -> divide -> ReLU (e.g. KernelBench 2/9, 2/39, 2/63).
FOLD_GEMM_AFFINE = problem(
    "        self.linear = nn.Linear(32, 24)\n"
    "        self.bias = nn.Parameter(torch.randn(24))\n"
    "        self.scale = nn.Parameter(torch.rand(1) + 0.5)",
    "        x = self.linear(x) * 2.5\n"
    "        x = x + self.bias\n"
    "        x = x - 0.25\n"
    "        x = x / self.scale\n"
    "        x = 1.0 - x\n"
    "        return torch.relu(-x)",
    "[torch.randn(16, 32)]")

# Conv2d -> * scale -> + bias (C, 1, 1) -> mean over H, W -> * 0.5 -> + per-channel shift after the mean; a conv
# without bias, a scale after the reduction (commutes).
FOLD_CONV_AFFINE = problem(
    "        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)\n"
    "        self.bias = nn.Parameter(torch.randn(8, 1, 1))\n"
    "        self.shift = nn.Parameter(torch.randn(8))",
    "        x = self.conv(x) * 3.0 + self.bias\n"
    "        x = torch.mean(x, dim=(2, 3))\n"
    "        x = x * 0.5 + self.shift\n"
    "        return torch.sigmoid(x)",
    "[torch.randn(2, 3, 10, 10)]")

# ConvTranspose3d -> scalar multiply -> sum over the channels -> + 1 (e.g. KernelBench 2/13, 2/50).
FOLD_CONV_TRANSPOSE = problem(
    "        self.conv_t = nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1)\n"
    "        self.scale = 0.75",
    "        x = self.conv_t(x) * self.scale\n"
    "        x = torch.sum(x, dim=1, keepdim=True)\n"
    "        return x + 1.0",
    "[torch.randn(2, 4, 4, 5, 5)]")

# Conv2d -> BatchNorm2d (eval, non-trivial running statistics) -> tanh; Linear -> BatchNorm1d -> GELU.
FOLD_BN = problem(
    "        self.conv = nn.Conv2d(3, 8, 3)\n"
    "        self.bn = nn.BatchNorm2d(8, eps=1e-3)\n"
    "        self.linear = nn.Linear(8, 12)\n"
    "        self.bn1 = nn.BatchNorm1d(12)\n"
    "        with torch.no_grad():\n"
    "            for bn in (self.bn, self.bn1):\n"
    "                bn.running_mean.uniform_(-1.0, 1.0)\n"
    "                bn.running_var.uniform_(0.5, 2.0)\n"
    "                bn.weight.uniform_(0.5, 1.5)\n"
    "                bn.bias.uniform_(-0.5, 0.5)",
    "        x = torch.tanh(self.bn(self.conv(x)))\n"
    "        x = x.mean(dim=(2, 3))\n"
    "        return F.gelu(self.bn1(self.linear(x)))",
    "[torch.randn(4, 3, 9, 9)]")

# Linear -> dropout -> sum over the features (keepdim) -> max, mean and logsumexp over that size-1 dim (KernelBench
# 2/18, 2/66).
GEMM_TO_GEMV = problem(
    "        self.linear = nn.Linear(40, 30)\n"
    "        self.dropout = nn.Dropout(0.3)",
    "        x = self.dropout(self.linear(x))\n"
    "        x = torch.sum(x, dim=1, keepdim=True)\n"
    "        x = torch.max(x, dim=1, keepdim=True)[0]\n"
    "        x = torch.mean(x, dim=1, keepdim=True)\n"
    "        x = torch.logsumexp(x, dim=1, keepdim=True)\n"
    "        return x",
    "[torch.randn(8, 40)]")

# x + x, a ReLU of a ReLU, hardtanh of a clamp, a sum over a size-1 dim, softmax over a size-1 dim, tril of tril
# products.
DROP_REDUNDANT = problem(
    "        self.relu = nn.ReLU()",
    "        y = x + x\n"
    "        y = self.relu(torch.relu(y))\n"
    "        y = F.hardtanh(torch.clamp(y, min=-0.5, max=3.0), -1.0, 2.0)\n"
    "        s = torch.sum(y.unsqueeze(1), dim=1)\n"
    "        p = torch.softmax(y[:, :1], dim=1)\n"
    "        t = torch.tril(torch.tril(a) @ torch.tril(a))\n"
    "        m = torch.amax(a, dim=1, keepdim=True)\n"
    "        z = m - m.mean(dim=1, keepdim=True)  # KernelBench 2/80: a mean over a size-1 dim, then x - x\n"
    "        return s * p + t + F.gelu(z)",
    "[torch.randn(6, 6), torch.randn(6, 6)]", signature="x, a")

# diag(a) @ B and B @ diag(a) (KernelBench 1/12).
DIAG_BROADCAST = problem(
    "        pass",
    "        return torch.diag(a) @ b + torch.matmul(b, torch.diag(a))",
    "[torch.randn(16), torch.randn(16, 16)]", signature="a, b")

# Preconditions that fail: a scale by a full tensor (an input), an output used twice, a BatchNorm after an activation,
# a sum over the batch dim (not the features), a diagonal off the main one, clamps with disjoint ranges.
NO_FOLD_FULL_OPERAND = problem(
    "        self.linear = nn.Linear(8, 8)",
    "        return self.linear(x) * x",
    "[torch.randn(4, 8)]")
NO_FOLD_SHARED_OUTPUT = problem(
    "        self.linear = nn.Linear(8, 8)",
    "        y = self.linear(x)\n"
    "        return y * 2.0, y",
    "[torch.randn(4, 8)]")
NO_FOLD_BN_AFTER_RELU = problem(
    "        self.conv = nn.Conv2d(3, 4, 3)\n"
    "        self.bn = nn.BatchNorm2d(4)",
    "        return self.bn(torch.relu(self.conv(x)))",
    "[torch.randn(2, 3, 8, 8)]")
NO_GEMV_BATCH_SUM = problem(
    "        self.linear = nn.Linear(8, 6)",
    "        return self.linear(x).sum(dim=0)",
    "[torch.randn(4, 8)]")
NO_DIAG_OFFSET = problem(
    "        pass",
    "        return torch.diag(a, 1) @ b",
    "[torch.randn(7), torch.randn(8, 8)]", signature="a, b")
NO_DROP_DISJOINT_CLAMPS = problem(
    "        pass",
    "        return torch.clamp(torch.clamp(x, 0.0, 1.0), 2.0, 3.0) + torch.sum(x, dim=1)[:, None]",
    "[torch.randn(4, 8)]")

# ConvTranspose3d -> * scale -> AvgPool3d -> + bias (C, 1, 1, 1) -> * scale (KernelBench 2/50
# ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling), then MaxPool2d after a conv with a positive scale and a shift
# folded through it, a negative scale after it not.
FOLD_THROUGH_POOLS = problem(
    "        self.conv_t = nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1)\n"
    "        self.pool = nn.AvgPool3d(2)\n"
    "        self.bias = nn.Parameter(torch.randn(4, 1, 1, 1))\n"
    "        self.conv = nn.Conv2d(3, 5, 3)\n"
    "        self.max_pool = nn.MaxPool2d(2, padding=1)",
    "        a = self.pool(self.conv_t(x) * 0.5) + self.bias\n"
    "        a = a * 1.5\n"
    "        b = self.max_pool(self.conv(y) - 0.25) * 2.0 + 1.0\n"
    "        return a, b * -3.0",
    "[torch.randn(2, 3, 4, 6, 6), torch.randn(2, 3, 9, 9)]", signature="x, y")

# KernelBench 2/42 (ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply): a conv-transpose only averaged over
# its whole map, then a bias (folded through the mean), logsumexp over the channels, a sum over size-1 dims, * 10.
CONV_TRANSPOSE_GLOBAL_MEAN = problem(
    "        self.conv_transpose = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)\n"
    "        self.bias = nn.Parameter(torch.randn(6, 1, 1))",
    "        x = self.conv_transpose(x)\n"
    "        x = torch.mean(x, dim=(2, 3), keepdim=True)\n"
    "        x = x + self.bias\n"
    "        x = torch.logsumexp(x, dim=1, keepdim=True)\n"
    "        x = torch.sum(x, dim=(2, 3))\n"
    "        return x * 10.0",
    "[torch.randn(3, 4, 9, 7)]")

# KernelBench 2/13 (ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling): a mean over the depth only -> window sums along
# the depth, then a ConvTranspose2d over height and width with the depth's kernel offsets as input channels; and a
# Conv2d summed over its width only (the reduced dim after the kept one: the offsets are moved next to the channels).
CONV_PARTIAL_MEAN = problem(
    "        self.conv_transpose = nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1)\n"
    "        self.bias = nn.Parameter(torch.randn(1, 6, 1, 1, 1))\n"
    "        self.conv = nn.Conv2d(3, 5, 3, stride=(1, 2), padding=1, groups=1)",
    "        x = self.conv_transpose(x)\n"
    "        x = x.mean(dim=2, keepdim=True)\n"
    "        x = torch.softmax(x + self.bias, dim=1)\n"
    "        x = torch.tanh(x) * 2.0\n"
    "        return x, self.conv(y).sum(dim=3)",
    "[torch.randn(2, 4, 5, 6, 7), torch.randn(2, 3, 9, 10)]", signature="x, y")

# Each way of reducing a conv's whole map: a strided, dilated, padded Conv1d summed without keepdim; a grouped Conv3d
# without bias into adaptive average pooling; a Conv2d with padding="same" into an AvgPool2d over the whole map; a
# grouped, dilated ConvTranspose2d averaged over the channels and the map; a functional conv summed (keepdim).
CONV_WINDOW_SUMS = problem(
    "        self.conv1 = nn.Conv1d(3, 4, 3, stride=2, padding=2, dilation=2)\n"
    "        self.conv3 = nn.Conv3d(4, 6, (2, 3, 2), stride=(1, 2, 2), padding=1, groups=2, bias=False)\n"
    "        self.pool3 = nn.AdaptiveAvgPool3d(1)\n"
    "        self.conv2 = nn.Conv2d(3, 5, 3, padding=\"same\")\n"
    "        self.pool2 = nn.AvgPool2d((8, 6))\n"
    "        self.up = nn.ConvTranspose2d(4, 6, 3, stride=3, padding=2, output_padding=1, groups=2, dilation=2)\n"
    "        self.weight = nn.Parameter(torch.randn(5, 3, 4))",
    "        a = self.conv1(x).sum(-1)\n"
    "        b = self.pool3(self.conv3(v)).flatten(1)\n"
    "        c = self.pool2(self.conv2(y)) * 2.0\n"
    "        d = self.up(z).mean(dim=[1, 2, 3])\n"
    "        e = torch.sum(F.conv1d(x, self.weight, None, 3), dim=2, keepdim=True)\n"
    "        return a, b, c, d, e",
    "[torch.randn(2, 3, 17), torch.randn(2, 3, 8, 6), torch.randn(2, 4, 5, 4), torch.randn(2, 4, 5, 6, 7)]",
    signature="x, y, z, v")

# Preconditions that fail: the conv's output also used elsewhere; a sum over the channels only (no spatial dim); average pooling
# to one value per channel from a window smaller than the map; a non-linear op between the conv and the mean.
NO_WINDOW_SUMS = problem(
    "        self.conv = nn.Conv2d(3, 4, 3)\n"
    "        self.pool = nn.AvgPool2d(2, stride=4)",
    "        y = self.conv(x)\n"
    "        a = y.mean(dim=(2, 3)) + y[:, :, 0, 0]\n"
    "        b = self.conv(x).sum(dim=1)\n"
    "        c = self.pool(self.conv(x[:, :, :6, :6]))\n"
    "        d = torch.relu(self.conv(x)).mean(dim=(2, 3))\n"
    "        return a, b, c, d",
    "[torch.randn(2, 3, 10, 10)]")

POSITIVE = {"FOLD_THROUGH_POOLS": ("fold-affine",), "FOLD_GEMM_AFFINE": ("fold-affine",), "FOLD_CONV_AFFINE": ("fold-affine",),
            "FOLD_CONV_TRANSPOSE": ("fold-affine",), "FOLD_BN": ("fold-bn",),
            "GEMM_TO_GEMV": ("drop-redundant", "gemm-to-gemv"), "DROP_REDUNDANT": ("drop-redundant",),
            "DIAG_BROADCAST": ("diag-broadcast",),
            "CONV_TRANSPOSE_GLOBAL_MEAN": ("drop-redundant", "fold-affine", "conv-to-window-sums"),
            "CONV_WINDOW_SUMS": ("conv-to-window-sums",), "CONV_PARTIAL_MEAN": ("conv-to-window-sums",)}
NEGATIVE = {"NO_FOLD_FULL_OPERAND": "fold-affine", "NO_FOLD_SHARED_OUTPUT": "fold-affine",
            "NO_FOLD_BN_AFTER_RELU": "fold-bn", "NO_GEMV_BATCH_SUM": "gemm-to-gemv", "NO_DIAG_OFFSET": "diag-broadcast",
            "NO_DROP_DISJOINT_CLAMPS": "drop-redundant", "NO_WINDOW_SUMS": "conv-to-window-sums"}
