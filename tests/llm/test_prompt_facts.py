"""The prompts' device facts come from what the harness's result really holds (the measured
copy and matmul ceilings read back from the roofline and profile figures), and every node's speed in a window is the
one figure the verdict uses (node.speed: its runtime against the reference's), not three different reference times."""

from __future__ import annotations

from search.engine.context import describe
from search.engine.engine import device_facts
from search.engine.node import Node


def test_the_ceilings_are_read_back_from_the_result() -> None:
    result = {"environment": {"device_name": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0"},
              "roofline": {"pct_of_peak": 50.0, "bound": "memory", "achieved_gbps": 2100.0, "achieved_tflops": 0.5},
              "profile": {"achieved_gbps": 1000.0, "pct_of_copy": 25.0}}
    facts = device_facts("cuda", result)
    assert facts["copy_gbps"] == 4200.0 and facts["device_name"] == "NVIDIA H200"
    compute = device_facts("cuda", {"roofline": {"pct_of_peak": 40.0, "bound": "compute", "achieved_tflops": 200.0},
                                    "profile": {"achieved_gbps": 1000.0, "pct_of_copy": 25.0}})
    assert compute["matmul_tflops"] == 500.0 and compute["copy_gbps"] == 4000.0
    assert "copy_gbps" not in device_facts("cuda", {"roofline": {"pct_of_peak": 50.0, "bound": "memory",
                                                                 "achieved_gbps": 9.0, "ceilings_implausible": True}})


def test_a_node_is_described_by_the_verdicts_figure() -> None:
    node = Node(id=3, parent=0, attempt=3, role="plan+code", status="done", verdict="pass", runtime_ms=1.182,
                speedup_vs_eager=6.77, speed={"value": 7.61, "runtime_ms": 1.182, "reference_ms": 8.993,
                                               "text": "7.61× (7.4–7.8)", "short": "7.61×", "reference": False})
    line = describe(node)
    assert "runtime 1.182 ms" in line and "7.61× (7.4–7.8) vs the reference's 8.993 ms" in line
    assert "6.77" not in line and "vs eager" not in line
    root = Node(id=0, parent=None, attempt=0, role="root", status="done", verdict="pass", runtime_ms=8.993,
                speed={"value": 1.0, "reference": True, "text": "1.00× (the reference)"})
    assert "the reference time every speed-up is measured against" in describe(root)
