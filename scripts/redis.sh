#!/usr/bin/env bash
# Run a private redis-server in the foreground, bound to 127.0.0.1, data under var/redis-PORT.
# Usage: scripts/redis.sh PORT
set -euo pipefail
cd "$(dirname "$0")/.."
port=${1:?usage: scripts/redis.sh PORT}
dir="var/redis-$port"
mkdir -p "$dir"
exec redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save 60 1 --appendonly yes \
  --protected-mode yes --daemonize no --logfile "" --loglevel warning
