#!/usr/bin/env bash
# `make run`: set up, start a private Redis (unless REDIS_URL is given), migrate, then web + workers under
# scripts/supervise.py, which restarts whatever dies. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PORT=${PORT:-8000}
export STARK_VAR_DIR=${STARK_VAR_DIR:-$PWD/var}
var=$STARK_VAR_DIR
mkdir -p "$var"

# One `make run` per var directory: the lock lives as long as the supervisor (it inherits the descriptor).
exec 9>"$var/run.lock"
if ! flock -n 9; then
  echo "error: another \`make run\` is using $var; stop it (Ctrl-C) or set STARK_VAR_DIR to another directory." >&2
  exit 1
fi
if ! .venv/bin/python -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', int(sys.argv[1])))" "$PORT" 2>/dev/null; then
  echo "error: port $PORT is in use; stop what listens there or choose another with PORT=8001 make run." >&2
  exit 1
fi

.venv/bin/python manage.py check --fail-level ERROR >/dev/null  # a bad setting stops here, naming the variable
procfile="$var/Procfile.run"
gpu_workers=$(.venv/bin/python scripts/procfile.py Procfile "$procfile")  # STARK_GPU_WORKERS: a bad value stops here
echo "==> $gpu_workers gpu worker(s) (STARK_GPU_WORKERS, docs/settings.md)"
if [ -z "${REDIS_URL:-}" ]; then
  REDIS_URL=$(.venv/bin/python scripts/private_redis.py "$var")
  export REDIS_URL
  printf 'redis: exec scripts/redis.sh %q\n' "$var" >> "$procfile"
  echo "==> starting a private Redis (password in $var/redis/, listening on ${REDIS_URL#*@})"
elif ! .venv/bin/python manage.py stark_wait --timeout 3 >/dev/null; then
  echo "error: the Redis at REDIS_URL does not answer; start it, or unset REDIS_URL to let make run start a private one." >&2
  exit 1
else
  echo "==> using the Redis at REDIS_URL (shared Redis: this instance's keys are namespaced)"
fi
.venv/bin/python manage.py migrate --noinput -v 0
.venv/bin/python manage.py stark_bootstrap --url "http://127.0.0.1:$PORT"
exec .venv/bin/python scripts/supervise.py "$procfile"
