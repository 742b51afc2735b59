"""The table of a `python -m search bench --retime` run over the KernelBench-shaped set, from its tree files (a bench
cut short still counts every problem whose tree was written). Every figure and word comes from the verdict's package:
per suite the paper's metrics for any correct program and for custom kernels only (search.engine.suite_metrics), then
the counts faster beyond the noise vs eager and both compile modes, and slower than compile(default)
(suite_metrics.beyond_noise); per problem (search.bench_record.problem_record) its best correct attempt by the one
verdict, its class of win and what the run ships in the verdict's words (search.engine.verdict_words), its speed-ups
(also below 1.0), its % of roofline, whether the figures were re-timed side by side, and the best custom kernel's
figures. What this module adds: the move that made the best attempt (the chain of moves from the reference, from the
rules team's plan log, and its recipe). Prints Markdown and writes OUT.md and OUT.json:

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

from search.bench_metrics import suite_table
from search.bench_record import problem_record
from search.engine.node import Node
from search.engine.suite_metrics import NOTES, beyond_noise, summarize
from search.engine.tree import Tree
from search.engine.verdict_words import CLASS_WORDS, best_words, winner_words

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


def row_of(tree_file: Path) -> dict[str, Any]:
    tree = Tree.load(tree_file)
    problem = Path(tree.settings.get("problem_file") or tree_file.stem.replace("__", "/") + ".py")
    record = problem_record(problem, tree, str(tree.meta.get("status") or "unfinished"),
                            str(tree.meta.get("stop_reason") or "no stop reason recorded (cut short?)"), 0.0)
    source = SOURCE.search(tree.problem_source)
    attempts = [n for n in tree if n.parent is not None]
    record.update({
        "kernelbench": source.group(1) if source else "", "move": winning_move(tree, record),
        "pct_of_roofline": record["roofline_pct"], "correct_attempts": sum(n.correct for n in attempts),
        "device_name": (tree.meta.get("device_info") or {}).get("device_name"),
        "finished_at": max((n.finished_at or 0.0) for n in tree) or None,
    })
    return record


def fmt(x: float | None, suffix: str = "×") -> str:
    return "—" if x is None else f"{x:.2f}{suffix}"


def share(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "0/0"


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
        lines.append(f"| {r['suite']}/{r['name']} | {r['kernelbench']} | {best} | {CLASS_WORDS.get(r.get('class') or '', '—')} "
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
    summary = {s: beyond_noise([r for r in rows if r["suite"] == s]) for s in suites}
    summary["all"] = beyond_noise(rows)
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
