"""Why a torch.compile candidate can time slower than the torch.compile baseline on convolution models: time one
GPU-sized problem eager, as torch.compile(model) (the bench's baseline), as torch.compile(model.forward) (a bound
method, as the rules team's candidates did), and as compile(module) under the other forms, side by side with
triton's do_bench. Usage on a GPU host: python3 -m benchmarks compile-forms PROBLEM.py [PROBLEM.py ...]"""

from __future__ import annotations

import json
import sys

import torch
from triton.testing import do_bench

from benchmarks import common
from benchmarks.common import load_module


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out="var/bench/compile_forms.json")
    parser.add_argument("problems", nargs="+", help="problem files (KernelBench format)")
    args = parser.parse_args(argv)
    rows = []
    for path in args.problems:
        p = load_module(path)
        torch.manual_seed(0)
        model = p.Model(*p.get_init_inputs()).cuda()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in p.get_inputs()]
        forms = {"eager": model, "compile(module)": torch.compile(model),
                 "compile(bound forward)": torch.compile(model.forward),
                 "compile(module, max-autotune-no-cudagraphs)": torch.compile(model, mode="max-autotune-no-cudagraphs")}
        row = {"problem": path}
        with torch.no_grad():
            for name, fn in forms.items():
                fn(*inputs)
                torch.cuda.synchronize()
                row[name] = round(do_bench(lambda fn=fn, inputs=inputs: fn(*inputs), warmup=25, rep=200), 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
    common.write_report("compile_forms", rows, args.out, torch.cuda.get_device_name())
    return 0


if __name__ == "__main__":
    sys.exit(main())
