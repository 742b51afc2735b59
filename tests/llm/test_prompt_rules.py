"""The rules the prompts state match the evaluator (issue "LLM teams ready for a real key", point 7): what fails a
candidate and what only flags it are derived here from the harness's own constants and source, so the prompt cannot
drift from what judges the candidate. And the device facts the engine passes are rendered readably."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kernels.parent.result import VERDICTS
from kernels.parent.settings import EvalSettings
from search.engine.context import build_window
from search.engine.engine import device_facts
from search.engine.tree import Tree
from search.engine.win_class import LABELS, NO_CUSTOM_KERNEL
from search.teams.llm.prompts import code, debug, plan, single
from search.teams.llm.prompts.common import (
    FAIL_VERDICTS,
    FAILING_CHECKS,
    FLAGGING_CHECKS,
    RULES,
    describe_device,
)

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
FAILS, FLAGGED = RULES.split("Only FLAGGED")
PROBLEM = (Path(__file__).parent / "fixtures" / "tiny_relu.py").read_text()


def _calls(path: Path) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]


def _const(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def harness_checks(status: str) -> set[str]:
    """The integrity checks the harness gives `status` ("fail" or "flag"): check(name, status, ...) calls and
    {"name": ..., "status": status} records in kernels/parent/judge.py and kernels/parent/evaluate.py, and (fail) judge's
    listed(name, fact, ...) checks."""
    names: set[str] = set()
    for path in (KERNELS / "parent" / "judge.py", KERNELS / "parent" / "evaluate.py"):
        for call in _calls(path):
            func = call.func.id if isinstance(call.func, ast.Name) else None
            args = [_const(a) for a in call.args]
            if func == "check" and len(args) >= 2 and args[1] == status and args[0]:
                names.add(args[0])
            if func == "listed" and status == "fail" and args and args[0]:
                names.add(args[0])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                record = {_const(k): _const(v) for k, v in zip(node.keys, node.values) if k is not None}
                if record.get("status") == status and record.get("name"):
                    names.add(str(record["name"]))
    return names


def test_the_tolerances_trials_and_timeouts_in_the_rules_are_the_harness_defaults() -> None:
    defaults = EvalSettings()
    atol, rtol = (float(x) for x in re.search(r"atol=([\d.e-]+), rtol=([\d.e-]+)", RULES).groups())  # type: ignore[union-attr]
    assert (atol, rtol) == (defaults.atol, defaults.rtol)
    assert int(re.search(r"on each of (\d+) trials", RULES).group(1)) == defaults.correctness_trials  # type: ignore[union-attr]
    assert float(re.search(r"([\d.]+) s \(build_timeout_s\)", RULES).group(1)) == defaults.build_timeout_s  # type: ignore[union-attr]
    assert float(re.search(r"([\d.]+) s \(run_timeout_s\)", RULES).group(1)) == defaults.run_timeout_s  # type: ignore[union-attr]
    share = float(re.search(r"more than (\d+)% of the tolerance", RULES).group(1)) / 100  # type: ignore[union-attr]
    assert share == defaults.precision_flag_fraction
    assert "NaN or Inf never passes" in FAILS and "same shapes and dtypes" in FAILS


def test_every_failing_verdict_and_check_of_the_harness_is_listed_as_failing() -> None:
    assert set(FAIL_VERDICTS) == set(VERDICTS) - {"pass"}
    derived = harness_checks("fail")
    assert {"harness_patched", "output_aliases_input", "timed_outputs_correct"} <= derived  # the derivation works
    assert derived <= set(FAILING_CHECKS), derived - set(FAILING_CHECKS)
    for name in (*FAIL_VERDICTS, *FAILING_CHECKS):
        assert name in FAILS and name not in FLAGGED, name


def test_every_flag_of_the_harness_is_listed_as_only_flagged_and_counted_for_what_it_is() -> None:
    derived = harness_checks("flag")
    assert derived == set(FLAGGING_CHECKS), derived ^ set(FLAGGING_CHECKS)
    for name in FLAGGING_CHECKS:
        assert name in FLAGGED and name not in FAILS, name
    assert "breaking one fails" not in RULES and "passes and is timed" in FLAGGED
    # no_custom_kernel: not a custom-kernel win, but the engine's win classes (search.engine.win_class)
    assert NO_CUSTOM_KERNEL in FLAGGED and "NOT a custom-kernel win" in FLAGGED
    assert f'"{LABELS["configuration"]}" win' in FLAGGED and f'"{LABELS["reference_equivalent"]}"' in FLAGGED


def test_every_role_states_the_rules() -> None:
    tree = Tree(PROBLEM, {"target": "cpp"}, root_source=PROBLEM.replace("class Model(", "class ModelNew("))
    w = build_window(tree, "plan", 0)
    for module in (plan, code, debug, single):
        assert RULES in module.system(w, "cpp")


ENVIRONMENT = {"device_name": "NVIDIA H200", "torch": "2.5.1+cu124", "cuda": "12.4", "capability": "9.0",
               "multiprocessors": 132, "memory_gb": 139.8}


def test_the_device_facts_the_engine_passes_are_rendered_readably() -> None:
    # The dict as the engine builds it (search.engine.engine.device_facts) from the reference's evaluation.
    result = {"environment": ENVIRONMENT,
              "roofline": {"bound": "memory", "pct_of_peak": 25.0, "achieved_gbps": 1000.0},
              "profile": {}}
    facts = device_facts("cuda", result)
    assert facts["copy_gbps"] == 4000.0 and facts["multiprocessors"] == 132
    facts["matmul_tflops"] = 494.5  # where the roofline was compute-bound (the engine's other ceiling)
    text = describe_device(facts)
    assert text.startswith("Device:\n")
    for needle in ("- NVIDIA H200 (cuda), compute capability 9.0, 132 SMs", "139.8 GB device memory",
                   "copy bandwidth 4000 GB/s", "matmul 494.5 TFLOP/s", "Software: torch 2.5.1+cu124, CUDA 12.4",
                   "The reference reaches 25% of its memory-bound roofline"):
        assert needle in text, needle
    assert "Other facts" not in text  # every field the engine passes has its place

    tree = Tree(PROBLEM, {"target": "cuda"}, root_source=PROBLEM.replace("class Model(", "class ModelNew("))
    system = plan.system(build_window(tree, "plan", 0, device=facts), "cuda")
    assert text in system


def test_device_facts_render_capability_as_a_pair_and_keep_unknown_keys() -> None:
    text = describe_device({"device": "cuda:0", "capability": [8, 0], "sms": 108})
    assert "cuda:0, compute capability 8.0" in text and "Other facts: sms = 108" in text
    assert describe_device({}) == "" and describe_device({"device": "cpu"}) == "Device:\n- cpu"
