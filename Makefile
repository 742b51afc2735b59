# The two commands of the README. Both set up everything they need on a fresh Debian machine.
.PHONY: run test test-fast setup lint

run:
	scripts/run.sh

test:
	scripts/test.sh $(ARGS)

# The unit tests: no worker, server, browser, harness child or compiler (those are marked slow/browser/gpu).
test-fast:
	scripts/test.sh -m "not slow and not browser and not gpu" $(ARGS)

setup:
	scripts/setup.sh --with-browser

lint:
	.venv/bin/ruff check .
	.venv/bin/python -m mypy
