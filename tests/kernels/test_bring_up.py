"""What a harness child brings up before its first hold of the device lock (kernels.child.bring_up)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernels.child.bring_up import wants_compiler
from kernels.parent.isolation.lock_broker import bring_up_wanted

ROOT = Path(__file__).resolve().parents[2]


def test_a_source_that_names_the_compiler_wants_it() -> None:
    assert wants_compiler("self.f = torch.compile(f)")
    assert wants_compiler("import torch._dynamo")
    assert wants_compiler("", "from torch._inductor import config")
    assert not wants_compiler("import torch\nclass ModelNew(torch.nn.Module): ...", "")
    assert not wants_compiler()


def test_the_setting_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STARK_BRING_UP", raising=False)
    assert bring_up_wanted()
    monkeypatch.setenv("STARK_BRING_UP", "0")
    assert not bring_up_wanted()
    monkeypatch.setenv("STARK_BRING_UP", "auto")
    assert bring_up_wanted()
    monkeypatch.setenv("STARK_BRING_UP", "later")
    with pytest.raises(ValueError, match="STARK_BRING_UP='later' must be 1, 0 or auto"):
        bring_up_wanted()


CHILD = textwrap.dedent("""
    import json, sys
    import torch
    from kernels.child.bring_up import before_holding
    cpu, on, off = torch.device("cpu"), {"timing": {"bring_up": True}}, {"timing": {"bring_up": False}}
    seen = {"start": "torch._dynamo" in sys.modules}
    seen["plain"] = before_holding(on, cpu, sources=("class ModelNew: pass",))
    seen["after plain"] = "torch._dynamo" in sys.modules
    seen["off"] = before_holding(off, cpu, sources=("torch.compile(f)",))
    seen["after off"] = "torch._dynamo" in sys.modules
    seen["compile"] = before_holding(on, cpu, sources=("torch.compile(f)",))
    seen["after compile"] = [m in sys.modules for m in ("torch._dynamo", "torch._inductor.compile_fx")]
    print(json.dumps(seen))
""")


@pytest.mark.slow
def test_the_compiler_is_imported_only_for_a_source_that_names_it_and_only_when_asked() -> None:
    """In a fresh interpreter, as a harness child starts: nothing for a plain source or with the setting off; the
    modules torch.compile() imports, for one that calls it."""
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["start"] is False and seen["plain"] == {} and seen["after plain"] is False, seen
    assert seen["off"] == {} and seen["after off"] is False, seen
    assert seen["compile"]["done"] == ["compiler"] and seen["compile"]["seconds"] > 0, seen
    assert seen["after compile"] == [True, True], seen
