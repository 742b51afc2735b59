# The two commands of the README. Both set up everything they need on a fresh Debian machine.
.PHONY: run test test-fast setup lint bench-cpu bench-smoke

run:
	scripts/run.sh

test:
	scripts/test.sh $(ARGS)

# The unit tests: no worker, server, browser, harness child or compiler (those are marked slow/browser/gpu).
# Sets up the virtualenv without chromium and reuses it while pyproject.toml is unchanged.
test-fast:
	scripts/test.sh --fast $(ARGS)

setup:
	scripts/setup.sh --with-browser

# The benchmarks' smoke runs that take minutes on a 2-core host (left out of make test): every question's CPU smoke.
bench-smoke:
	scripts/test.sh -m minutes benchmarks/tests/test_smoke.py

lint:
	.venv/bin/ruff check .
	.venv/bin/python -m mypy
	.venv/bin/lint-imports

# The CPU benchmarks that finish in a few minutes (benchmarks/README.md: the index), results under var/bench/.
bench-cpu:
	mkdir -p var/bench
	.venv/bin/python -m benchmarks kb-set --out var/bench/kb_set.json
	.venv/bin/python -m benchmarks sandbox-overhead --repeats 1 --out var/bench/sandbox.json
	.venv/bin/python -m benchmarks profiling-cost --device cpu --repeats 1 --runs 5 --out var/bench/profiling_cost.json
	.venv/bin/python -m benchmarks rules-trace-store --budget 2 --out var/bench/rules_trace_store.json
