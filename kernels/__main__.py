"""`python -m kernels ...` (see kernels/cli.py)."""

from __future__ import annotations

import sys

from kernels.cli import main

sys.exit(main())
