# The two commands of the README. Both set up everything they need on a fresh Debian machine.
.PHONY: run test setup lint

run:
	scripts/run.sh

test:
	scripts/test.sh $(ARGS)

setup:
	scripts/setup.sh --with-browser

lint:
	.venv/bin/ruff check .
