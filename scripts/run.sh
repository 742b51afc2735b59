#!/usr/bin/env bash
# `make run`: set up, start (or reuse) Redis, migrate, then web + workers under honcho. Ctrl-C stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PORT=${PORT:-8000}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
mkdir -p var

.venv/bin/python manage.py check --fail-level ERROR >/dev/null  # a bad setting stops here, naming the variable
procfile=var/Procfile.run
cp Procfile "$procfile"
if ! .venv/bin/python -c "import redis,os; redis.Redis.from_url(os.environ['REDIS_URL'], socket_connect_timeout=1).ping()" 2>/dev/null; then
  redis_port=$(.venv/bin/python -c "from urllib.parse import urlparse; import os; print(urlparse(os.environ['REDIS_URL']).port or 6379)")
  redis_host=$(.venv/bin/python -c "from urllib.parse import urlparse; import os; print(urlparse(os.environ['REDIS_URL']).hostname)")
  case "$redis_host" in 127.0.0.1|localhost) ;; *)
    echo "error: REDIS_URL=$REDIS_URL does not answer and is not local; start that server or unset REDIS_URL." >&2; exit 1;;
  esac
  echo "redis: scripts/redis.sh $redis_port" >> "$procfile"
  echo "==> starting a private Redis on 127.0.0.1:$redis_port (data in var/redis-$redis_port)"
else
  echo "==> reusing the Redis at $REDIS_URL"
fi
.venv/bin/python manage.py migrate --noinput -v 0
.venv/bin/python manage.py stark_bootstrap --url "http://127.0.0.1:$PORT"
exec .venv/bin/honcho -f "$procfile" -d . start
