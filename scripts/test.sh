#!/usr/bin/env bash
# `make test`: set up, start a private password-protected Redis on a unix socket, run the whole suite, stop what it started.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/kernels -x).
# `scripts/test.sh --fast` (make test-fast): the unit tests only, without installing a browser (the virtualenv is
# reused while pyproject.toml is unchanged: scripts/setup.sh's stamp).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then fast=1; shift; set -- -m "not slow and not browser and not gpu" "$@"; fi
if [ "$fast" = 1 ]; then scripts/setup.sh; else scripts/setup.sh --with-browser; fi
# The benchmarks' minutes-long smoke runs (marker `minutes`) are `make bench-smoke`'s, unless the arguments pick markers.
case " $* " in *" -m "*) ;; *) set -- -m "not minutes" "$@" ;; esac
mkdir -p var test-artifacts

# Like make run's: a unix socket in a 0700 folder, a random password (the suite exercises that URL form).
redis_dir=$(mktemp -d "$PWD/var/test-redis-XXXX")
password=$(.venv/bin/python -c "import secrets; print(secrets.token_hex(24))")
cat > "$redis_dir/redis.conf" <<CONF
port 0
unixsocket $redis_dir/redis.sock
unixsocketperm 700
requirepass $password
dir $redis_dir
save ""
appendonly no
daemonize yes
pidfile $redis_dir/redis.pid
logfile $redis_dir/redis.log
CONF
chmod 600 "$redis_dir/redis.conf"
redis-server "$redis_dir/redis.conf"
stop_redis() { [ -f "$redis_dir/redis.pid" ] && kill "$(cat "$redis_dir/redis.pid")" 2>/dev/null; rm -rf "$redis_dir"; }
trap stop_redis EXIT

export REDIS_URL="unix://:$password@$redis_dir/redis.sock?db=0"
export STARK_VAR_DIR="$PWD/var/test"
export STARK_TEST_ARTIFACTS="$PWD/test-artifacts"
# The tests that build the rules team's C++ in their own process (tests/teams: load_inline) keep the builds per
# checkout: in ~/.cache/torch_extensions, shared by every checkout of the machine, a checkout with another venv path
# (a CI clone) changes their compile commands and each side rebuilds all of them (5 builds, ~3 CPU-minutes here).
# Harness children never see this: each builds in its own work dir (kernels/parent/isolation/work_dirs.py).
export TORCH_EXTENSIONS_DIR="$PWD/var/test/torch_extensions"
# the harness children's precompiled torch headers (kernels/parent/pch.py): one directory for the whole run
export STARK_PCH_DIR="$PWD/var/test/pch"
for _ in $(seq 50); do .venv/bin/python -c "import redis,os; redis.Redis.from_url(os.environ['REDIS_URL']).ping()" 2>/dev/null && break; sleep 0.1; done

echo "==> ruff"
.venv/bin/ruff check .
# mypy and lint-imports run beside the tests (a CPU-minute that would otherwise hold back the suite's start); their
# output is printed after the tests and a finding fails the command like a failed test.
lint_log=$(mktemp "$PWD/var/lint-XXXX")
(
  status=0
  echo "==> mypy (the pure packages: [tool.mypy] in pyproject.toml)"
  .venv/bin/python -m mypy || status=1
  echo "==> lint-imports (the layers and the import rules: [tool.importlinter] in pyproject.toml)"
  .venv/bin/lint-imports || status=1
  exit "$status"
) > "$lint_log" 2>&1 &
lint_pid=$!
lint_result() { local status=0; wait "$lint_pid" || status=$?; cat "$lint_log"; rm -f "$lint_log"; return "$status"; }
# Tests run side by side in STARK_TEST_WORKERS processes (pytest-xdist; default 3, 1 = one process): much of the suite
# waits on workers, servers, harness children and the browser. Each process gets its own Redis database, var dir
# (SQLite) and kernel cache (tests/parallel_workers.py). Beside others a test that times kernels or races a deadline
# can fail only because the machine is busy: the tests that failed are run once more, one at a time, and decide.
workers=${STARK_TEST_WORKERS:-3}
if [ "$workers" = 1 ]; then
  echo "==> pytest (Redis at $redis_dir/redis.sock, one process)"
  status=0
  .venv/bin/python -m pytest "$@" || status=$?
  lint_result || status=$((status ? status : 1))
  exit "$status"
fi
echo "==> pytest (Redis at $redis_dir/redis.sock, $workers processes side by side)"
# Idle OpenMP threads sleep instead of spinning: side by side, a spinning thread takes the core another test needs
# (measured on the C++ kernel tests: 12% less CPU, 11% less wall time).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
status=0
.venv/bin/python -m pytest -p tests.parallel_workers -n "$workers" --dist worksteal "$@" || status=$?
lint=0
lint_result || lint=1
if [ "$status" = 1 ]; then  # 1: tests failed; anything else (interrupted, usage, internal error) stands
  echo "==> pytest: the tests that failed beside others, once more one at a time (a pass here is printed as such)"
  status=0
  .venv/bin/python -m pytest --last-failed --last-failed-no-failures none -rA "$@" || status=$?
fi
[ "$status" != 0 ] && exit "$status"
exit "$lint"
