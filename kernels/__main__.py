"""`python -m kernels ...` (see kernels/parent/cli.py)."""

from __future__ import annotations

import sys

from kernels.parent.cli import main

sys.exit(main())
