#!/usr/bin/env bash
# Run the private redis-server of a var directory in the foreground (config written by scripts/private_redis.py:
# a password, a unix socket in VAR/redis/ (mode 0700) or 127.0.0.1 only, AOF data in VAR/redis/).
# Usage: scripts/redis.sh VAR_DIR
set -euo pipefail
conf="${1:?usage: scripts/redis.sh VAR_DIR}/redis/redis.conf"
[ -f "$conf" ] || { echo "error: $conf is missing; scripts/private_redis.py writes it (make run does)." >&2; exit 1; }
exec redis-server "$conf"
