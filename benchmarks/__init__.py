"""The benchmark suite: scripts run from the repository root as modules (`python -m benchmarks.NAME`); the index
is benchmarks/README.md, the shared problem loader and output schema benchmarks/common.py."""
