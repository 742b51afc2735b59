"""Small KernelBench-style problems for the rules team's layout and cuDNN moves (search.teams.rules.analysis.convs): a
convolution of each rank (1-D: no channels-last format; 2-D: NHWC; 3-D: NDHWC), a forward whose `view` breaks on a
channels-last tensor, and a forward whose FLOPs are mostly a GEMM (not conv-dominated)."""

from __future__ import annotations

from tests.teams.rewrite_problems import problem

# Conv3d -> ReLU -> + bias (C, 1, 1, 1) -> sigmoid (e.g. KernelBench 2/7): 5-D weights and input, NDHWC.
CONV3D_CHAIN = problem(
    "        self.conv = nn.Conv3d(3, 6, 3, padding=1)\n"
    "        self.bias = nn.Parameter(torch.randn(6, 1, 1, 1))",
    "        x = torch.relu(self.conv(x))\n"
    "        return torch.sigmoid(x + self.bias)",
    "[torch.randn(2, 3, 5, 6, 7)]")

# ConvTranspose1d -> tanh (e.g. KernelBench 1/79): 3-D weights and input, no channels-last format.
CONV1D_TANH = problem(
    "        self.conv = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, dilation=2)",
    "        return torch.tanh(self.conv(x))",
    "[torch.randn(2, 4, 33)]")

# Conv2d -> flatten by view -> * 2 (e.g. LeNet): the view of a channels_last output merges C with H, W and fails.
CONV_VIEW_FLATTEN = problem(
    "        self.conv = nn.Conv2d(3, 8, 3)",
    "        y = self.conv(x)\n"
    "        return y.view(y.shape[0], -1) * 2.0",
    "[torch.randn(2, 3, 10, 10)]")

# Conv2d (1x1, few channels) -> flatten by reshape -> a large Linear: most FLOPs in the GEMM, not conv-dominated.
CONV_THEN_GEMM = problem(
    "        self.conv = nn.Conv2d(2, 2, 1)\n"
    "        self.fc = nn.Linear(2 * 8 * 8, 512)",
    "        y = torch.relu(self.conv(x))\n"
    "        return self.fc(y.reshape(y.shape[0], -1))",
    "[torch.randn(4, 2, 8, 8)]")
