"""Parent-side comparison of candidate outputs with reference outputs (tolerances, shapes, dtypes, NaN/Inf)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernels.shared import digest

# Scale-aware check: besides |got - want| <= atol + rtol |want| per element, the worst error must stay within
# rtol times the largest reference magnitude plus this fraction of atol, so outputs far below atol (a wide
# softmax) cannot pass as garbage.
SCALE_FLOOR = 1e-3


@dataclass
class Comparison:
    """One trial's outcome: ok, the worst errors, and the fraction of the tolerance the worst element used."""

    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    tolerance_used: float = 0.0
    reason: str = ""


def compare(candidate: list[Any], reference: list[Any], dtypes: list[str] | None,
            atol: float, rtol: float, specials: bool = False, nan_drops: int = 0, spread: bool = False) -> Comparison:
    """Candidate outputs against reference outputs. NaN/Inf never pass, unless `specials` (the fuzzing stage's
    variants): then the candidate must be NaN/Inf where the reference is (`special_mismatch`), and the finite rest is
    compared with the tolerance. `nan_drops`: how many of the reference's NaN the candidate may give as finite
    values in all (the NaN inputs there were: a NaN-ignoring max or min drops each where it meets it). `spread`
    (NaN or Inf inputs): the candidate may have NaN/Inf at more positions than the reference (a prefix sum or a
    blocked reduction spreads an Inf further, even into outputs whose windows skip it); it never hides one."""
    drops = [nan_drops]
    if len(candidate) != len(reference):
        return Comparison(False, reason=f"forward() returned {len(candidate)} output(s), expected {len(reference)}")
    result = Comparison(True)
    for i, (got, want) in enumerate(zip(candidate, reference)):
        if digest.is_digest(got) or digest.is_digest(want):
            if not (digest.is_digest(got) and digest.is_digest(want)):
                return Comparison(False, reason=f"output {i}: kept whole on one side and as a digest on the other "
                                  "(its size differs from the reference's)")
            expected_dtype = dtypes[i] if dtypes else str(want["dtype"])
            if str(got["dtype"]) != expected_dtype:
                return Comparison(False, reason=f"output {i} has dtype {got['dtype']}, expected {expected_dtype}")
            ok, reason, max_abs, max_rel, used = digest.compare_digests(got, want, i, atol, rtol)
            result.max_abs, result.max_rel = max(result.max_abs, max_abs), max(result.max_rel, max_rel)
            result.tolerance_used = max(result.tolerance_used, used)
            if not ok:
                result.ok = False
                result.reason = result.reason or reason
            continue
        if not isinstance(got, torch.Tensor):
            return Comparison(False, reason=f"output {i} is not a tensor")
        if tuple(got.shape) != tuple(want.shape):
            return Comparison(False, reason=f"output {i} has shape {list(got.shape)}, expected {list(want.shape)}")
        expected_dtype = dtypes[i] if dtypes else str(want.dtype)
        if str(got.dtype) != expected_dtype:
            return Comparison(False, reason=f"output {i} has dtype {got.dtype}, expected {expected_dtype}")
        if got.numel() == 0:
            continue
        if not (want.is_floating_point() or want.is_complex()):  # indices, counts, masks: exact or wrong
            wrong = int((got != want).sum())
            if wrong:
                return Comparison(False, reason=f"output {i}: {wrong} of {got.numel()} {got.dtype} values differ "
                                  "from the reference (integer and bool outputs must match exactly)")
            continue
        wide = torch.float64 if want.dtype == torch.float64 or got.dtype == torch.float64 else torch.float32
        g = got.to(wide) if not got.is_complex() else got
        w = want.to(wide) if not want.is_complex() else want
        if specials and not want.is_complex() and (spread or not bool(torch.isfinite(w).all())):
            mismatch, dropped = special_mismatch(g, w, i, drops)
            if mismatch:
                return Comparison(False, reason=mismatch)
            finite = torch.isfinite(w) & ~dropped & (torch.isfinite(g) if spread else True)
            if not bool(finite.any()):
                continue
            g, w = g[finite], w[finite]
        if (got.is_floating_point() or got.is_complex()) and not bool(torch.isfinite(g).all()):
            bad = int((~torch.isfinite(g)).sum())
            return Comparison(False, reason=f"output {i} contains {bad} NaN/Inf value(s) where the reference's are "
                              "finite" if specials else f"output {i} contains {bad} NaN/Inf value(s); NaN/Inf never pass")
        diff = (g - w).abs()
        limit = atol + rtol * w.abs()
        used = float((diff / limit.clamp_min(1e-30)).max()) if atol or rtol else float(diff.max() > 0)
        max_abs = float(diff.max())
        max_rel = float((diff / w.abs().clamp_min(1e-12)).max())
        result.max_abs = max(result.max_abs, max_abs)
        result.max_rel = max(result.max_rel, max_rel)
        result.tolerance_used = max(result.tolerance_used, used)
        if not bool((diff <= limit).all()):
            count = int((diff > limit).sum())
            result.ok = False
            result.reason = result.reason or (
                f"output {i}: {count} of {got.numel()} values outside atol={atol} rtol={rtol} "
                f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g})")
            continue
        scale = float(w.abs().max())
        if (atol or rtol) and max_abs > rtol * scale + atol * SCALE_FLOOR:
            result.ok = False
            result.reason = result.reason or (
                f"output {i}: max abs error {max_abs:.3g} is large against the output's own scale (max |value| "
                f"{scale:.3g}): every value is within atol={atol}, but only because the outputs are tiny; errors must "
                f"also stay within rtol x max|reference| + {SCALE_FLOOR:g} x atol")
    return result


def special_mismatch(got: torch.Tensor, want: torch.Tensor, index: int,
                     drops: list[int]) -> tuple[str, torch.Tensor]:
    """Why `got` is not NaN/Inf where `want` is ("" when it is), and the positions where a NaN was dropped.

    Where the reference is NaN the candidate must be NaN or Inf (formulas differ on inf - inf or inf x 0: torch's
    GELU gives NaN at +Inf where its tanh form gives +Inf), except at up to `drops[0]` positions in all, as many as
    there were NaN inputs: IEEE 754's maxNum/minNum (fmaxf, Triton's tl.maximum) return the other operand for a NaN,
    so an elementwise max or a max-reduction may drop each NaN it meets; a NaN the reference spreads further (over
    a row, through a sum) must reach the candidate's outputs. Where the reference is +-Inf, the candidate is that
    Inf or NaN, never a finite value or the opposite Inf."""
    dropped = want.isnan() & torch.isfinite(got)
    count = int(dropped.sum())
    if count and count <= drops[0]:
        drops[0] -= count
    elif count:
        at = [int(v) for v in dropped.nonzero()[0]]
        return (f"output {index}: the reference has NaN at {int(want.isnan().sum())} position(s) and the candidate "
                f"gives finite values at {count} of them (e.g. at {at}: {float(got[tuple(at)]):.4g}), more than the "
                f"{drops[0]} NaN input(s) a NaN-ignoring max or min could drop: a NaN must spread as in the reference "
                "(nan_to_num, a clamp or a masked sum hides it)"), dropped
    for what, mask, ok in (("+Inf", want == float("inf"), got.isnan() | (got == float("inf"))),
                           ("-Inf", want == float("-inf"), got.isnan() | (got == float("-inf")))):
        wrong = mask & ~ok
        if bool(wrong.any()):
            at = [int(v) for v in wrong.nonzero()[0]]
            return (f"output {index}: the reference has {what} at {int(mask.sum())} position(s) and the candidate "
                    f"does not at {int(wrong.sum())} of them (e.g. at {at}: {float(got[tuple(at)]):.4g}): an Inf "
                    "must stay an Inf (nan_to_num or a clamp makes it finite)"), dropped
    return "", dropped


def identical(a: list[Any], b: list[Any]) -> bool:
    """Bitwise-equal outputs (NaNs in the same places count as equal)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if digest.is_digest(x) and digest.is_digest(y):  # block sums do not depend on the sampled positions
            if not identical([x["sums"], x["abs_sums"]], [y["sums"], y["abs_sums"]]):
                return False
            continue
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            return False
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point():
            if not bool(((x == y) | (x.isnan() & y.isnan())).all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True
