"""torch.compile's compiler pool per harness child: one process by default (a pool is Python processes with torch
loaded, started in every child), a count from $STARK_COMPILE_THREADS, a clear error otherwise."""

from __future__ import annotations

import pytest

from kernels.parent.reference import COMPILE_THREADS_ENV, compile_threads, worker_env


def test_one_compiler_process_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COMPILE_THREADS_ENV, raising=False)
    assert compile_threads() == 1
    assert worker_env() == {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    monkeypatch.setenv(COMPILE_THREADS_ENV, " Auto ")
    assert worker_env() == {"TORCHINDUCTOR_COMPILE_THREADS": "1"}


def test_a_count_is_handed_to_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMPILE_THREADS_ENV, "4")
    assert worker_env() == {"TORCHINDUCTOR_COMPILE_THREADS": "4"}


@pytest.mark.parametrize("bad", ["0", "-2", "four", ""])
def test_anything_else_names_the_setting_and_its_values(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(COMPILE_THREADS_ENV, bad)
    with pytest.raises(ValueError, match="STARK_COMPILE_THREADS=.* must be a count .* or auto"):
        compile_threads()
