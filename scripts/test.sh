#!/usr/bin/env bash
# `make test`: set up, start a private Redis on a free port, run the whole suite, stop what it started.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/kernels -x).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-browser
mkdir -p var test-artifacts

port=$(.venv/bin/python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
redis_dir=$(mktemp -d var/test-redis-XXXX)
redis-server --port "$port" --bind 127.0.0.1 --dir "$redis_dir" --save "" --appendonly no \
  --daemonize yes --pidfile "$PWD/$redis_dir/redis.pid" --logfile "$PWD/$redis_dir/redis.log"
stop_redis() { [ -f "$redis_dir/redis.pid" ] && kill "$(cat "$redis_dir/redis.pid")" 2>/dev/null; rm -rf "$redis_dir"; }
trap stop_redis EXIT

export REDIS_URL="redis://127.0.0.1:$port/0"
export STARK_VAR_DIR="$PWD/var/test"
export STARK_TEST_ARTIFACTS="$PWD/test-artifacts"
for _ in $(seq 50); do .venv/bin/python -c "import redis,os; redis.Redis.from_url(os.environ['REDIS_URL']).ping()" 2>/dev/null && break; sleep 0.1; done

echo "==> ruff"
.venv/bin/ruff check .
echo "==> pytest (Redis at $REDIS_URL)"
.venv/bin/python -m pytest "$@"
