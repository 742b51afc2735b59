"""The reference's evaluation tells the agents which device they write for (its facts land in tree.meta)."""

from __future__ import annotations

from typing import Any

from kernels.parent.problem import reference_candidate
from search.engine.engine import Engine
from search.engine.tree import Tree
from search.teams import get_team
from tests.engine.helpers import PROBLEM, script_evaluate


def evaluate_on_a_named_device(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
    result = script_evaluate(problem, candidate, settings)
    result["environment"] = {"device_name": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", "python": "3.12"}
    result["roofline"] = {"pct_of_peak": 96.74, "bound": "memory"}
    return result


def test_the_root_evaluation_names_the_device_for_the_prompts():
    tree = Tree(PROBLEM, {"seed": 0, "budget": 2, "device": "cuda"}, root_source=reference_candidate(PROBLEM))
    engine = Engine(tree, get_team("scripted", {"script": "ok:0.5,ok:0.9"}), evaluate_on_a_named_device,
                    lambda event: None)
    engine.evaluate_root()
    assert tree.meta["device_info"] == {"device": "cuda", "device_name": "NVIDIA H200", "torch": "2.11.0",
                                        "cuda": "13.0", "reference_pct_of_roofline": 96.7, "reference_bound": "memory"}
    child = engine.expand(engine.select())
    window = engine.window("plan", tree.root.id, child)
    assert window.device["device_name"] == "NVIDIA H200"
    assert Tree.from_dict(tree.to_dict()).meta["device_info"]["device_name"] == "NVIDIA H200"


def test_a_cpu_reference_states_its_threads_in_the_prompt():
    from search.engine.engine import device_facts
    from search.teams.llm.prompts.common import describe_device

    facts = device_facts("cpu", {"environment": {"device_name": "AMD EPYC 9654", "torch": "2.13.0", "cuda": None,
                                                 "cpu_threads": 16, "python": "3.11", "hostname": "h"}})
    assert facts == {"device": "cpu", "device_name": "AMD EPYC 9654", "torch": "2.13.0", "cpu_threads": 16}
    text = describe_device(facts)
    assert "AMD EPYC 9654 (cpu), 16 CPU threads" in text and "SMs" not in text
