"""The parent's side of the harness: starting, confining and watching the children that run untrusted code.

- sandbox: run one child (`python -m kernels.child.worker`) with deadlines, memory/disk/process budgets and an
  authenticated result channel (worker_run: what came back); watch: its deadlines and channel bounds;
  kernels.shared.process_tree: its processes.
- layers: the isolation layers of this host (process, bubblewrap, sandbox uid) and the limits a child enters
  (kernels.shared.limits enters them); cgroups: its control groups; bubblewrap: the bwrap command line;
  work_dirs: the child's work directory.
- zygote: warm start (the zygote process itself is kernels.child.zygote_server).
- lock_broker: the device lock, taken by the parent on a child's behalf.
- isolated_call: call a registered function on untrusted input in a child.

Nothing here imports kernels.child (import-linter's "harness: ..." contracts in pyproject.toml): the child's code is
named only by module name, in the command lines that start it.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]  # the directory that holds the `kernels` package
