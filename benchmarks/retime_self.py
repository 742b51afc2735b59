"""Side-by-side re-time of each problem's reference against itself (the reference renamed ModelNew): the ratio a
user would see for two identical kernels. A protocol without bias gives 1.00 within its spread; the table shows the
median ratio, the lowest and highest per-round ratio and the wall time of one re-time (kernels.parent.retime).

    python -m benchmarks retime-self benchmarks/problems/kb_scale/*.py --device cuda --rounds 6 --out OUT.json
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from benchmarks import common
from kernels.parent.retime import RetimeError, retime


def main() -> None:
    parser = common.parser(__doc__, device="cuda", out_required=True)
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    common.check_device(args.device, "retime-self --device cuda")
    rows = []
    for path in args.problems:
        started = time.monotonic()
        try:
            got = retime(path.read_text(), None, {"device": args.device}, rounds=args.rounds)
            row = {"problem": path.stem, "reference_ms": got["reference"]["median_ms"],
                   "candidate_ms": got["candidate"]["median_ms"], "ratio": got["speedup"],
                   "low": got["spread"]["low"], "high": got["spread"]["high"], "unstable": got["unstable"],
                   "why": got["unstable_why"], "wall_s": got["wall_s"]}
        except RetimeError as exc:
            row = {"problem": path.stem, "error": exc.message[:500], "wall_s": round(time.monotonic() - started, 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        common.write_report("retime_self", rows, args.out, args.device, {"rounds": args.rounds})
    print("| problem | reference ms | same kernel ms | ratio | per-round low-high | unstable | wall s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['problem']} | error: {r['error'][:80]} | | | | | {r['wall_s']} |")
        else:
            print(f"| {r['problem']} | {r['reference_ms']:.4g} | {r['candidate_ms']:.4g} | {r['ratio']:.3f} | "
                  f"{r['low']:.3f}-{r['high']:.3f} | {'yes: ' + r['why'] if r['unstable'] else 'no'} | "
                  f"{r['wall_s']} |")


if __name__ == "__main__":
    main()
