"""The fuzzing stage on a corpus (tests/kernels/fixtures/fuzz/): Triton kernels under Triton's CPU interpreter for
the examples' own problems. Every illusion passes the standard trials and fails a named, replayable variant; every
control passes; the same verdicts with the stage's seed changed. One test, so the corpus runs in as few children as
the harness allows (the reference sides are cached per problem and seed; children fork from the warm zygote)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernels import EvalSettings, evaluate
from kernels.parent.cli import main as cli_main

pytestmark = pytest.mark.slow  # harness evaluations: children

CORPUS = Path(__file__).parent / "fixtures" / "fuzz"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "problems" / "level1"
# the examples' own problems at smaller default sizes (Triton's interpreter runs every program in Python)
SMALLER = {"softmax": {"batch_size = 256": "batch_size = 16", "dim = 16384": "dim = 512"},
           "relu": {"batch_size = 64": "batch_size = 8", "dim = 65536": "dim = 4096"},
           "layernorm": {"batch_size = 16": "batch_size = 4", "seq_len = 256": "seq_len = 16",
                         "hidden = 1024": "hidden = 256"}}
# (problem, candidate, the variants an illusion must fail: name prefixes; None for a control)
CASES = [
    ("softmax", "control_softmax", None),
    ("softmax", "illusion_softmax_no_max", ("x0.large",)),
    ("relu", "control_relu", None),
    ("relu", "illusion_relu_no_tail", ("size.dim=",)),
    ("relu", "illusion_relu_flat_pointer", ("x0.strided",)),
    ("bias_add", "control_bias_add", None),
    ("bias_add", "illusion_bias_wrong_broadcast", ("size.batch_size=",)),
    ("layernorm", "control_layernorm", None),
    ("layernorm", "illusion_layernorm_no_eps", ("x0.all_equal", "x0.zeros")),
]
FUZZ_SEEDS = (0, 7)


def source(name: str) -> str:
    problem = name.removeprefix("problem_")
    if problem in SMALLER:
        text = (EXAMPLES / f"{problem}.py").read_text()
        for old, new in SMALLER[problem].items():
            assert f"\n{old}\n" in text, (problem, old)
            text = text.replace(f"\n{old}\n", f"\n{new}\n")
        return text
    return (CORPUS / f"{name}.py").read_text()


def test_the_corpus_illusions_fail_a_named_variant_and_the_controls_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    settings = EvalSettings(cache_dir=str(tmp_path), correctness_trials=5, timing_runs=2, warmup_runs=0, baselines=(),
                            roofline=False, profile=False, build_timeout_s=300, run_timeout_s=120,
                            memory_limit_mb=4096, sandbox="none", reuse_results=False)
    verdicts: dict[int, dict[str, str]] = {}
    for fuzz_seed in FUZZ_SEEDS:
        verdicts[fuzz_seed] = {}
        for problem, candidate, expected in CASES:
            result = evaluate(source(f"problem_{problem}"), source(candidate), settings.replace(fuzz_seed=fuzz_seed))
            fuzz = result.fuzz or {}
            # the stage's own account first (a skipped stage says why in its note and per variant)
            why = (candidate, fuzz_seed, result.verdict, fuzz.get("note"), fuzz.get("skipped", [])[:3], result.reasons,
                   result.fuzz, result.logs["run"][-2000:])
            verdicts[fuzz_seed][candidate] = result.verdict
            assert fuzz.get("level") == "standard" and fuzz.get("seed") == fuzz_seed, why
            assert result.correctness and result.correctness["passed"] == result.correctness["trials"] == 5, why
            assert fuzz["run"] >= 5 and fuzz["cost_s"] > 0, why
            if expected is None:
                assert result.verdict == "pass" and not fuzz["failed"], why
                assert any(r.startswith("fuzzing (standard): correct on") for r in result.reasons), why
                continue
            assert result.verdict == "incorrect", why
            failed = [f["name"] for f in fuzz["failed"]]
            assert any(name.startswith(expected) for name in failed), why
            first = fuzz["failed"][0]
            assert f"--fuzz-seed {fuzz_seed} " in first["replay"] and first["seed"] > 0, why
            assert result.reasons[0].startswith(f"fuzzing: incorrect on variant {first['name']} ("), why
            assert "replay: python -m kernels fuzz" in result.reasons[0], why
    assert verdicts[FUZZ_SEEDS[0]] == verdicts[FUZZ_SEEDS[1]]

    # one failing variant replayed alone from the command line: the same failure
    problem_file, candidate_file = tmp_path / "problem.py", tmp_path / "candidate.py"
    problem_file.write_text(source("problem_softmax"))
    candidate_file.write_text(source("illusion_softmax_no_max"))
    code = cli_main(["fuzz", str(problem_file), str(candidate_file), "--fuzz-seed", "7", "--variant", "x0.large", "--json",
                     "--cache-dir", str(tmp_path), "--sandbox", "none", "--memory-mb", "4096"])
    assert code == 1
    replayed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert replayed["verdict"] == "incorrect" and [f["name"] for f in replayed["fuzz"]["failed"]] == ["x0.large"]
    assert replayed["fuzz"]["run"] == 1 and "NaN/Inf" in replayed["fuzz"]["failed"][0]["reason"]
