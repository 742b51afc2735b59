"""The JSON API (docs/api.md): runs, nodes, kernels and bundles, for scripts and the CLI."""
