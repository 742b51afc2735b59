#!/usr/bin/env python
"""Django's command-line utility for STARK Studio."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "stark_web.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:  # a bad setting: say which, without a traceback
        sys.stderr.write(f"error: bad setting: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
