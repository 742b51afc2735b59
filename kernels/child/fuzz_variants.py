"""Child-side work of the fuzzing stage (kernels.parent.fuzz is the parent's side).

- `reference` (task kind "fuzz_reference"): the problem's reference on every variant of the plan, in a process the
  candidate never runs in: float64 where the reference runs so (else its own dtype), the variant skipped where the
  reference cannot run it, returns NaN/Inf on finite inputs (special-value variants keep the reference's NaN/Inf:
  they are matched; with NaN inputs, the outputs with those NaN read as -Inf are kept too, what a NaN-ignoring max
  gives), or returns more than the whole-output limit. A "params" variant builds its own models
  (kernels.child.fuzz_params). Each variant's tolerance
  starts from the per-(op, dtype) table and is widened (x4 at a time, at most x64) until the reference in its own
  dtype passes against float64: a variant that is ill-conditioned for the problem itself never fails a candidate.
  Its atol is also scaled by how much larger the variant's outputs are than those of the file's own inputs (mean
  magnitude, at least x1): inputs x 1e3 ask for the same precision relative to the outputs as the file's inputs, so
  an honest kernel whose summation order or TF32 convolution differs from the reference's passes, and an error at
  the outputs' own scale still fails.
- `candidate_variants`: inside the candidate's child, after the correctness trials (phase "fuzz"): the candidate's
  outputs on the variants the reference ran, kept as host copies (or the error a variant raised); for a "params"
  variant a second candidate model built with the parameters re-drawn and aligned to the reference's.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernels.child import bring_up, device_lock, fuzz_params, loading
from kernels.child.channel import Channel
from kernels.child.fuzz_inputs import variant_inputs
from kernels.shared import correctness, digest

ACCUMULATING = ("matmul", "mm", "bmm", "addmm", "linear", "conv", "sum", "mean", "softmax", "norm", "var", "std",
                "cumsum", "prod", "einsum", "baddbmm", "scaled_dot_product")
# tolerance multipliers of the settings' atol/rtol by (op family, output dtype)
TOLERANCE = {("elementwise", "torch.float32"): 1.0, ("accumulating", "torch.float32"): 1.0,
             ("elementwise", "torch.float16"): 2.0, ("accumulating", "torch.float16"): 4.0,
             ("elementwise", "torch.bfloat16"): 4.0, ("accumulating", "torch.bfloat16"): 8.0}
WIDEN, MAX_WIDEN = 4.0, 64.0
SPECIAL = ("nan", "inf", "subnormal")  # variants whose reference may return NaN/Inf: matched, never skipped for it
MAX_PARAMS_BYTES = 1 << 30  # a "params" variant builds more models: skipped above this many bytes of state


def op_family(ops: list[str]) -> str:
    return "accumulating" if any(part in op.lower() for op in ops for part in ACCUMULATING) else "elementwise"


def base_tolerance(ops: list[str], dtypes: list[str], atol: float, rtol: float) -> tuple[float, float, str]:
    family = op_family(ops)
    factor = max((TOLERANCE.get((family, d), 1.0) for d in dtypes), default=1.0)
    return atol * factor, rtol * factor, family


def reference(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    from kernels.child.reference_work import load_problem, problem_model

    device = torch.device(task["device"])
    module = load_problem(task, work_dir)
    hold = device_lock.DeviceHold.for_task(task, channel)
    plan, limit = task["fuzz"], int(task.get("full_limit_bytes", digest.FULL_LIMIT_BYTES))
    bring_up.before_holding(task, device, sources=(task["problem_source"],))
    channel.phase("queue")
    with hold.shared():
        channel.phase("fuzz")
        native = problem_model(module, task, device)
        base = base_scales(module, plan, native, device)
        try:
            high: torch.nn.Module | None = problem_model(module, task, device, torch.float64)
        except Exception:  # noqa: BLE001 - a reference that cannot run in float64 is compared in its own dtype
            high = None
        made: dict[str, Any] = {}
        skipped: list[dict[str, str]] = []
        for index, variant in enumerate(plan["variants"]):
            if index:
                hold.let_timers_in()
            if variant["kind"] == "params":
                outcome = params_variant(module, plan, variant, device, task, limit)
            else:
                outcome = reference_variant(module, plan, variant, native, high, device, task, limit, base)
            if isinstance(outcome, str):
                skipped.append({"name": variant["name"], "why": outcome})
            else:
                made[variant["name"]] = outcome
    buffer = io.BytesIO()
    torch.save({"variants": made, "skipped": skipped}, buffer)
    Path(task["outputs_path"]).write_bytes(buffer.getvalue())
    channel.send("fuzz_reference", ran=sorted(made), skipped=skipped)


def reference_variant(module: Any, plan: dict[str, Any], variant: dict[str, Any], native: torch.nn.Module,
                      high: torch.nn.Module | None, device: torch.device, task: dict[str, Any],
                      limit: int, base: list[float] | None = None) -> dict[str, Any] | str:
    """The variant's reference record, or why it is skipped. `base`: the mean output magnitudes on the file's own
    inputs (`base_scales`), which the variant's atol is scaled against."""
    try:
        inputs = variant_inputs(module, plan, variant, device)
        with torch.no_grad():
            own = loading.flatten_outputs(native(*inputs))
    except Exception as exc:  # noqa: BLE001
        return f"the reference cannot run it ({type(exc).__name__}: {str(exc)[:160]})"
    special = variant.get("kind") == "special"
    nan_inputs = sum(int(x.isnan().sum()) for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point())
    if not special and any(not finite(o) for o in own):
        return "the reference itself returns NaN/Inf on it"
    if digest.wants_digest(own, limit):
        return f"its outputs ({digest.output_bytes(own) >> 20} MB) are larger than the whole-output limit"
    dtypes = [str(o.dtype) for o in own]
    atol, rtol, family = base_tolerance(task.get("ops") or [], dtypes, float(task["atol"]), float(task["rtol"]))
    # compared where they were computed (on a GPU: milliseconds, where the host took seconds inside the device hold)
    want, kind = expected(high, inputs, own, host=False)
    scaled = scale_factor(want, base)
    atol *= scaled
    widened = 1.0
    if kind == "float64":
        mine = [o.detach() for o in own]
        while not correctness.compare(mine, want, dtypes, atol * widened, rtol * widened, specials=True,
                                      nan_drops=nan_inputs).ok:
            widened *= WIDEN
            if widened > MAX_WIDEN:
                return (f"ill-conditioned: the reference in its own dtype differs from float64 by more than "
                        f"{MAX_WIDEN:g}x the tolerance")
    want = [w.to("cpu", copy=True) for w in want]
    record = {"outputs": want, "dtypes": dtypes, "atol": atol * widened, "rtol": rtol * widened, "reference": kind,
              "family": family, "nan_inputs": nan_inputs, "scaled": scaled}
    if nan_inputs and special:  # a NaN-ignoring max or min (IEEE maxNum: fmaxf, tl.maximum) treats NaN as -Inf
        ignored = [torch.where(x.isnan(), float("-inf"), x) if isinstance(x, torch.Tensor) and x.is_floating_point()
                   else x for x in inputs]
        try:
            with torch.no_grad():
                other = loading.flatten_outputs(native(*ignored))
            record["alternatives"] = [expected(high, ignored, other)[0]]
        except Exception:  # noqa: BLE001 - judged against the NaN-propagating reference alone
            pass
    return record


def expected(high: torch.nn.Module | None, inputs: list[Any], own: list[torch.Tensor], host: bool = True
             ) -> tuple[list[torch.Tensor], str]:
    """The outputs a candidate is compared with: the float64 reference's where it runs (see `widest`), else the
    reference's own; and which ("float64" or "native"). On the host, or where computed when not `host`."""
    want, kind = [o.detach().to("cpu", copy=True) if host else o.detach() for o in own], "native"
    if high is not None:
        try:
            wide = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            with torch.no_grad():
                exact = loading.flatten_outputs(high(*wide))
            if len(exact) == len(own) and all(e.shape == o.shape for e, o in zip(exact, own)):
                # integer outputs (indices, counts) stay the reference's own: float64 may break ties differently;
                # NaN/Inf stay where the reference in its own dtype has them (and where float64 has them alone)
                want = [widest(e, o, host) for e, o in zip(exact, own)]
                kind = "float64"
        except Exception:  # noqa: BLE001 - compared against the reference in its own dtype instead
            pass
    return want, kind


def base_scales(module: Any, plan: dict[str, Any], native: torch.nn.Module, device: torch.device
                ) -> list[float] | None:
    """The mean magnitude of each reference output on the file's own inputs (its sizes, the first variant's seed);
    None when they cannot be made."""
    seed = next((int(v["seed"]) for v in plan["variants"] if "seed" in v), 0)
    try:
        inputs = variant_inputs(module, plan, {"kind": "base", "seed": seed}, device)
        with torch.no_grad():
            return [magnitude(o) for o in loading.flatten_outputs(native(*inputs))]
    except Exception:  # noqa: BLE001 - no scaling: the variants keep the table's tolerance
        return None


def magnitude(o: Any) -> float:
    """Mean absolute value of a floating tensor's finite elements (0 when none, or not a floating tensor)."""
    if not isinstance(o, torch.Tensor) or not (o.is_floating_point() or o.is_complex()) or o.numel() == 0:
        return 0.0
    values = o.detach().abs().to(torch.float64)
    values = values[torch.isfinite(values)]
    return float(values.mean()) if values.numel() else 0.0


def scale_factor(outputs: list[torch.Tensor], base: list[float] | None) -> float:
    """How much larger the variant's outputs are than the file's own (the smallest ratio over the outputs, at
    least 1): its atol's multiplier."""
    if not base or len(base) != len(outputs):
        return 1.0
    sizes = [(magnitude(o), b) for o, b in zip(outputs, base)]  # each output's finite values read once
    ratios = [m / b for m, b in sizes if b > 0 and m > 0]
    return max(1.0, min(ratios)) if ratios else 1.0


def finite(o: torch.Tensor) -> bool:
    return not (o.is_floating_point() or o.is_complex()) or bool(torch.isfinite(o).all())


def widest(exact: torch.Tensor, own: torch.Tensor, host: bool = True) -> torch.Tensor:
    """The float64 output, but the reference's own where either is NaN/Inf; the reference's own when integer."""
    own = own.detach().to("cpu", copy=True) if host else own.detach()
    if not (own.is_floating_point() or own.is_complex()):
        return own
    exact = exact.detach().to("cpu", copy=True) if host else exact.detach()
    keep = torch.isfinite(exact) & torch.isfinite(own)
    return torch.where(keep, exact, own.to(exact.dtype)) if not bool(keep.all()) else exact


def params_variant(module: Any, plan: dict[str, Any], variant: dict[str, Any], device: torch.device,
                   task: dict[str, Any], limit: int) -> dict[str, Any] | str:
    """A "params" variant's record: the reference built with its parameters re-drawn (kernels.child.fuzz_params)."""
    from kernels.child.reference_work import problem_model

    seed = int(variant["seed"])
    try:
        args = loading.init_inputs(module, device)
        native = fuzz_params.build(module.Model, args, seed, device, reference=True)
    except Exception as exc:  # noqa: BLE001
        return f"the reference cannot be built with re-drawn parameters ({type(exc).__name__}: {str(exc)[:160]})"
    tensors = fuzz_params.state(native)
    if not tensors:
        return "the reference has no floating parameters or buffers to re-draw"
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    if size > MAX_PARAMS_BYTES:
        return f"the reference's parameters ({size >> 20} MB) are too large to build more models for"
    plain = problem_model(module, task, device)
    if all(torch.equal(t, s.to(t.device)) for t, s in zip(tensors.values(), fuzz_params.state(plain).values())):
        return "re-drawing changes none of the reference's parameters or buffers"
    del plain
    try:
        high: torch.nn.Module | None = fuzz_params.build(module.Model, args, seed, device, torch.float64,
                                                          reference=True)
    except Exception:  # noqa: BLE001
        high = None
    return reference_variant(module, plan, variant, native, high, device, task, limit)


def candidate_variants(model: torch.nn.Module, problem: Any, task: dict[str, Any], device: torch.device,
                       channel: Channel, between: Callable[[], None] = lambda: None) -> list[list[Any]]:
    """[[variant name, outputs (host copies) or the error it raised]] for the variants the parent asked for;
    `between` runs between two variants (DeviceHold.let_timers_in)."""
    plan = task.get("fuzz")
    if not plan or not plan.get("variants"):
        return []
    channel.phase("fuzz")
    kept: list[list[Any]] = []
    for index, variant in enumerate(plan["variants"]):
        if index:
            between()
        try:
            inputs = variant_inputs(problem, plan, variant, device)
        except Exception as exc:  # noqa: BLE001 - the harness's own failure: said, never the candidate's
            kept.append([variant["name"], f"harness: the inputs could not be made ({type(exc).__name__}: {exc})"])
            continue
        try:
            used = model if variant["kind"] != "params" else redrawn_candidate(model, problem, task, variant, device)
        except Exception as exc:  # noqa: BLE001 - a candidate whose constructor fails under another seed fails it
            kept.append([variant["name"], f"ModelNew(...) with re-drawn parameters raised {type(exc).__name__}: "
                                          f"{str(exc)[:300]}"])
            continue
        try:
            with torch.no_grad():
                outputs = loading.flatten_outputs(used(*inputs))
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            kept.append([variant["name"], [o.detach().to("cpu", copy=True) for o in outputs]])
        except Exception as exc:  # noqa: BLE001 - a candidate that raises on a variant fails it
            kept.append([variant["name"], f"forward() raised {type(exc).__name__}: {str(exc)[:300]}"])
        del used
        del inputs
    channel.send("progress", step="fuzz", variants=len(kept))
    return kept


def redrawn_candidate(model: torch.nn.Module, problem: Any, task: dict[str, Any], variant: dict[str, Any],
                      device: torch.device) -> torch.nn.Module:
    """The candidate's class built under the variant's seed with parameters re-drawn, its state aligned to the
    reference's re-drawn one (kernels.child.fuzz_params.align)."""
    seed = int(variant["seed"])
    args = loading.init_inputs(problem, device)
    reference = fuzz_params.build(problem.Model, args, seed, device, reference=True)
    candidate = fuzz_params.build(type(model), args, seed, device)

    def original() -> dict[str, torch.Tensor]:
        return fuzz_params.state(loading.build_model(problem.Model, args, int(task["seed"]), device))

    fuzz_params.align(candidate, fuzz_params.state(reference), original, fuzz_params.state(model))
    del reference
    return candidate
