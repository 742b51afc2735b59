"""The table of a `python -m search bench --retime` run over the KernelBench-shaped set, from its tree files (a bench
cut short still counts every problem whose tree was written): per suite the paper's metrics as KernelBench defines
them (search.bench_metrics: Success, fast_p, mean/geomean over solved problems) for any correct program and for
custom kernels only, then the counts faster beyond the noise vs eager and both compile modes, and slower than
compile(default), each beyond the noise of both figures); per problem its best correct attempt by the one verdict (search.engine.verdict)
and the move that made it (the chain of moves from the reference, from the rules team's plan log, and its recipe),
its class of win (search.engine.win_class), what the run ships (the reference kept when no attempt beat it), its
speed-up vs eager, vs torch.compile(default) and vs max-autotune (also below 1.0), its % of roofline, whether the
figures were re-timed side by side, and the best custom kernel's figures. Uses the bench's own record
(search.bench_record.problem_record). Prints Markdown and writes OUT.md and OUT.json:

    python -m benchmarks kb-table --out benchmarks/results/kb-rules/kb_rules [--device-note "..."] TREE.json [...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from search.bench_metrics import NOTES, best_words, suite_table, summarize, winner_words
from search.bench_record import problem_record
from search.engine.node import Node
from search.engine.tree import Tree

MOVE = re.compile(r"^plan: move (\S+):", re.MULTILINE)
RECIPE = re.compile(r"^Recipe: (.+)$", re.MULTILINE)
SOURCE = re.compile(r"After KernelBench (\S+)")


def move_of(node: Node) -> str:
    """One step's move: the rules team's move name, "debug" for a fix, else the instruction's first words."""
    found = MOVE.search(node.agent_log or "")
    if found:
        return found.group(1)
    if node.role == "debug":
        return "debug fix"
    return (node.instruction or "?").splitlines()[0][:60]


def winning_move(tree: Tree, record: dict[str, Any]) -> str:
    """The moves that made the problem's best correct attempt."""
    if record.get("best") is None:
        return "—"
    node = tree[record["best"]]
    chain = [move_of(n) for n in reversed([node, *tree.ancestors(node.id)]) if n.parent is not None]
    recipe = RECIPE.search(node.source or "")
    return " → ".join(chain) + (f" (`{recipe.group(1)}`)" if recipe else "")


def roofline_pct(tree: Tree, record: dict[str, Any]) -> float | None:
    node = tree[record["best"]] if record.get("best") is not None else None
    pct = (((node.result or {}).get("roofline") or {}).get("pct_of_peak")) if node is not None else None
    return None if pct is None else float(pct)


def row_of(tree_file: Path) -> dict[str, Any]:
    tree = Tree.load(tree_file)
    problem = Path(tree.settings.get("problem_file") or tree_file.stem.replace("__", "/") + ".py")
    record = problem_record(problem, tree, str(tree.meta.get("status") or "unfinished"),
                            str(tree.meta.get("stop_reason") or "no stop reason recorded (cut short?)"), 0.0)
    source = SOURCE.search(tree.problem_source)
    attempts = [n for n in tree if n.parent is not None]
    record.update({
        "kernelbench": source.group(1) if source else "", "move": winning_move(tree, record),
        "pct_of_roofline": roofline_pct(tree, record), "correct_attempts": sum(n.correct for n in attempts),
        "device_name": (tree.meta.get("device_info") or {}).get("device_name"),
        "finished_at": max((n.finished_at or 0.0) for n in tree) or None,
    })
    return record


def _range(record: dict[str, Any], key: str, custom: bool = False) -> tuple[float, float] | None:
    """The figure's range against one baseline: the attempt's (low, high) over that baseline's ratio to the
    reference (its side-by-side spread when re-timed); None when not measured."""
    r = (record.get("custom") or {}) if custom else record
    value = r.get("speedup_vs_eager")
    if value is None or (key != "eager" and r.get(f"speedup_vs_{key}") is None):
        return None
    low = float(record["low"] if not custom and record.get("low") is not None else value)
    high = float(record["high"] if not custom and record.get("high") is not None else value)
    if key == "eager":
        return low, high
    ratio = float(value) / float(r[f"speedup_vs_{key}"])  # that compile mode's speed-up vs the reference
    spread = (((record.get("retime") or {}).get(key) or {}).get("spread")) or {}
    return low / float(spread.get("high") or ratio), high / float(spread.get("low") or ratio)


def suite_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)

    def count(key: str, faster: bool = True, custom: bool = False) -> int:
        ranges = [_range(r, key, custom) for r in rows if r["success"]]
        return sum(1 for g in ranges if g is not None and (g[0] > 1.0 if faster else g[1] < 1.0))

    # Each problem's figure is its best correct attempt's: a reference kept is never a win, and a best attempt
    # slower than a compile mode counts as slower than it, whoever ships. Faster or slower beyond the noise: the
    # whole range on one side of 1.0 (search.engine.verdict.outcome), as every other view says it.
    return {
        "n": n, "success": sum(r["success"] for r in rows),
        "faster_vs_eager": count("eager"),
        "faster_vs_compile": count("compile"),
        "faster_vs_compile_max_autotune": count("compile_max_autotune"),
        "custom_faster_vs_compile": count("compile", custom=True),
        "slower_than_compile": count("compile", faster=False),
        "retimed": sum(bool(r.get("retimed")) for r in rows),
        "reference_wins": sum(r.get("winner") == "reference" for r in rows),
    }


def fmt(x: float | None, suffix: str = "×") -> str:
    return "—" if x is None else f"{x:.2f}{suffix}"


def share(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "0/0"


CLASS = {"custom_kernel": "custom kernel", "configuration": "configuration", "reference_equivalent": "reference-equiv."}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Rules team on the KernelBench-shaped set — {result['device']}, {result['date']}", "",
             "The paper's metrics (KernelBench's definitions; each problem's figure is its best correct attempt's):", "",
             *suite_table(result["metrics"], result["problems"]), "",
             "| suite | n | Success | faster beyond the noise vs eager | vs compile(default) | vs max-autotune | "
             "custom kernels only: vs compile(default) | slower than compile(default) beyond the noise | reference "
             "kept | re-timed |", "|---|---|---|---|---|---|---|---|---|---|"]
    for suite, s in result["summary"].items():
        lines.append(f"| {suite} | {s['n']} | {share(s['success'], s['n'])} | "
                     f"{share(s['faster_vs_eager'], s['n'])} | {share(s['faster_vs_compile'], s['n'])} | "
                     f"{share(s['faster_vs_compile_max_autotune'], s['n'])} | "
                     f"{share(s['custom_faster_vs_compile'], s['n'])} | "
                     f"{s['slower_than_compile']} | {s['reference_wins']} | {s['retimed']}/{s['n']} |")
    lines += ["", "| problem | KernelBench source | best attempt | class | ships | moves that made it | vs eager | "
              "vs compile(default) | vs max-autotune | % of roofline | re-timed | best custom kernel: vs eager / "
              "compile(default) | correct / attempts | stop |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["problems"]:
        best = best_words(r)
        c = r.get("custom")
        custom = "—" if not c else (f"#{c['node']} {fmt(c.get('speedup_vs_eager'))} / "
                                    f"{fmt(c.get('speedup_vs_compile'))}")
        lines.append(f"| {r['suite']}/{r['name']} | {r['kernelbench']} | {best} | {CLASS.get(r.get('class') or '', '—')} "
                     f"| {winner_words(r)} | {r['move']} | "
                     f"{fmt(r['speedup_vs_eager'])} | {fmt(r['speedup_vs_compile'])} | "
                     f"{fmt(r['speedup_vs_compile_max_autotune'])} | {fmt(r['pct_of_roofline'], '%')} | "
                     f"{'yes' if r.get('retimed') else 'no'}{' — ' + r['retime_note'] if r.get('retime_note') else ''} | "
                     f"{custom} | {r['correct_attempts']}/{r['attempts']} | "
                     f"{str(r['stop_reason'])[:80]} |")
    lines += ["", NOTES, "", "Best attempt: the problem's best correct attempt by the one verdict (side by side when "
              "re-timed); ships: what the run hands over (that attempt when it beat the reference, else the reference "
              "kept). Faster / slower beyond the noise: the best attempt's whole range (with the compile mode's "
              "side-by-side spread) above / below 1.0, as every view of the verdict says it. Re-timed: the "
              "contenders and both torch.compile modes were timed side by side with the reference after the search "
              "(`bench --retime` or `python -m search retime`, kernels/parent/retime.py); those figures replace the search's, "
              "except an entry that failed or stayed unstable after a second try (the host was busy), for which the "
              "search's figure stands and the cell says so. max-autotune is "
              "`torch.compile(mode=\"max-autotune-no-cudagraphs\")`. % of roofline: the best attempt's time against "
              "the roofline bound of its bytes and FLOPs (the harness's measured ceilings)."]
    return "\n".join(lines) + "\n"


def build(tree_files: list[Path], device_note: str | None = None) -> dict[str, Any]:
    rows = sorted((row_of(f) for f in tree_files), key=lambda r: (r["suite"], r["name"]))
    suites = sorted({r["suite"] for r in rows})
    summary = {s: suite_summary([r for r in rows if r["suite"] == s]) for s in suites}
    summary["all"] = suite_summary(rows)
    finished = [r["finished_at"] for r in rows if r["finished_at"]]
    names = sorted({r["device_name"] for r in rows if r["device_name"]})
    return {"date": time.strftime("%Y-%m-%d", time.gmtime(max(finished) if finished else time.time())),
            "device": device_note or ", ".join(names) or "unknown device", "problems": rows, "summary": summary,
            "metrics": summarize(rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", nargs="+", help="tree files written by `python -m search bench --trees`")
    ap.add_argument("--out", required=True, help="path without suffix for the .md and .json")
    ap.add_argument("--device-note", default=None, help="the device as the table's title names it")
    args = ap.parse_args(argv)
    result = build([Path(t) for t in args.trees], args.device_note)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = markdown(result)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
