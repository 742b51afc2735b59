#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine: system packages, the virtualenv and the project.
# Usage: scripts/setup.sh [--with-browser]
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=0
[ "${1:-}" = "--with-browser" ] && want_browser=1

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "error: need root to install Debian packages ($*); install them by hand or run as root." >&2; exit 1; fi; }

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v bwrap >/dev/null || missing+=(bubblewrap)
if [ "$want_browser" = 1 ] && [ ! -x /usr/bin/chromium ]; then missing+=(chromium); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi

stamp=.venv/.stark-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
      echo "==> installing torch (CUDA host)"
      .venv/bin/pip install -q torch triton
    else
      echo "==> installing torch 2.13.0 (CPU build, from the local wheel where present)"
      .venv/bin/pip install -q torch==2.13.0
    fi
  fi
  echo "==> installing the project, its dev tools and triton"
  .venv/bin/pip install -q -e ".[dev,triton]"  # triton: its interpreter runs the Triton kernels on the CPU in the tests
  touch "$stamp"
fi
