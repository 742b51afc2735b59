"""What the tests add to the product: the deterministic `scripted` team (tests/plugins/scripted.py).

The product's registry (search/teams/__init__.py) does not list it, so its API, form and CLI refuse it. The tests
register it in their own process (tests/conftest.py: pytest_configure) and in every Python child they start for
the product (workers, daphne, the CLI): those run through `python -m tests.plugins.launch ...` (launch.py)."""

from __future__ import annotations

import sys

TEST_TEAMS = {"scripted": "tests.plugins.scripted"}


def register() -> None:
    from search.teams import register_team

    for name, module_name in TEST_TEAMS.items():
        register_team(name, module_name)


def with_test_teams(args: list[str]) -> list[str]:
    """A command line that starts this interpreter, rewritten to register the test teams first."""
    if args and args[0] == sys.executable:
        return [sys.executable, "-m", "tests.plugins.launch", *args[1:]]
    return list(args)
