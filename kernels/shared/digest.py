"""Digests of large outputs: what a harness child keeps of an output too big to copy to host memory and to disk
for every trial (a 4096 x 393216 float32 output is 6.4 GB; a candidate evaluation keeps about ten of them).

A digest is computed on the device where the output lives, right after the call returned, and holds:
- `samples`: the values at SAMPLE_COUNT positions drawn from a secret seed (os.urandom in the candidate's process,
  drawn only after forward() returned, so the candidate cannot know which elements will be looked at);
- `sums` / `abs_sums`: float64 sums and absolute sums of the finite values in every block of CHUNK consecutive
  elements (flattened);
- `nonfinite`: the number of NaN/Inf values.
The reference child digests its own output for the same seed with the same position seed, and the parent compares
(`compare_digests`): every sampled element must pass the elementwise tolerance (|got - want| <= atol + rtol |want|),
and every block must satisfy |sum(got) - sum(want)| <= atol * n + rtol * sum|want| (and the same for the absolute
sums) — a bound every elementwise-correct output meets (triangle inequality), which catches any block whose
values are wrong by more than the tolerance on average (a wrong op, a missing epilogue, a shifted or truncated
region). Single isolated wrong elements outside the sample can pass: results judged this way say so
(`correctness.mode == "digest"`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

SAMPLE_COUNT = 1 << 20
CHUNK = 1024
FULL_LIMIT_BYTES = 16 << 20  # outputs of one call up to this size are kept whole and compared exactly
SLICE_CHUNKS = 1 << 14  # blocks summed at once (bounds the float64 temporary to 128 MB, on the CPU and the GPU)

_randint = torch.randint
_generator = torch.Generator


def output_bytes(outputs: list[Any]) -> int:
    return sum(o.numel() * o.element_size() for o in outputs if isinstance(o, torch.Tensor))


def wants_digest(outputs: list[Any], limit: int = FULL_LIMIT_BYTES) -> bool:
    return output_bytes(outputs) > limit


def digest(tensor: torch.Tensor, position_seed: int) -> dict[str, Any]:
    """The digest of one output (a plain dict of CPU tensors and numbers, loadable with weights_only)."""
    flat = tensor.detach().reshape(-1)
    n = flat.numel()
    record: dict[str, Any] = {"digest": True, "shape": list(tensor.shape), "dtype": str(tensor.dtype), "numel": n,
                              "position_seed": int(position_seed)}
    if n == 0:
        record.update(samples=torch.empty(0), positions=torch.empty(0, dtype=torch.long), sums=torch.empty(0),
                      abs_sums=torch.empty(0), nonfinite=0)
        return record
    gen = _generator(device=flat.device)
    gen.manual_seed(int(position_seed) % (2**63))
    positions = _randint(0, n, (min(SAMPLE_COUNT, n),), generator=gen, device=flat.device)
    record["positions"] = positions.cpu()
    record["samples"] = flat[positions].cpu()
    numeric = flat.is_floating_point() or flat.is_complex()
    wide = flat.abs() if flat.is_complex() else flat
    blocks = math.ceil(n / CHUNK)
    sums = torch.empty(blocks, dtype=torch.float64, device=flat.device)
    abs_sums = torch.empty(blocks, dtype=torch.float64, device=flat.device)
    nonfinite = 0
    # one float64 buffer for every slice, changed in place: a fresh one per slice would be new memory each time
    # (pages the system must zero and map again: more than half the digest of a 2 GB output on the CPU)
    buffer = torch.empty(min(blocks, SLICE_CHUNKS) * CHUNK, dtype=torch.float64, device=flat.device)
    for first in range(0, blocks, SLICE_CHUNKS):
        last = min(blocks, first + SLICE_CHUNKS)
        part = buffer[:(last - first) * CHUNK]
        piece = wide[first * CHUNK:min(n, last * CHUNK)]
        part[:piece.numel()].copy_(piece)
        part[piece.numel():].zero_()
        blocks_of = part.view(last - first, CHUNK)
        block_sums = blocks_of.sum(1)
        # NaN/Inf are counted apart and the sums cover the finite values; a block holds one iff its float64 sum is
        # not finite (values of 32 bits or fewer cannot overflow it), so the finite case needs no further pass
        if numeric and not bool(torch.isfinite(block_sums).all()):
            nonfinite += int(piece.numel() - int(torch.isfinite(piece).sum()))
            torch.nan_to_num_(part, nan=0.0, posinf=0.0, neginf=0.0)
            block_sums = blocks_of.sum(1)
        sums[first:last] = block_sums
        abs_sums[first:last] = blocks_of.abs_().sum(1)
        del part, blocks_of
    del buffer
    record["sums"], record["abs_sums"] = sums.cpu(), abs_sums.cpu()
    record["nonfinite"] = nonfinite
    return record


def is_digest(value: Any) -> bool:
    return isinstance(value, dict) and value.get("digest") is True


def keep(outputs: list[torch.Tensor], seeds: list[int] | None, full_limit: int = FULL_LIMIT_BYTES) -> list[Any]:
    """What to keep of one call's outputs: host copies when they are small, digests (under `seeds`, one per
    output) when they are large."""
    if seeds is None or not wants_digest(outputs, full_limit):
        return [o.detach().to("cpu", copy=True) for o in outputs]
    return [digest(o, s) for o, s in zip(outputs, seeds)]


def compare_digests(got: dict[str, Any], want: dict[str, Any], index: int, atol: float, rtol: float
                    ) -> tuple[bool, str, float, float, float]:
    """(ok, reason, max_abs, max_rel, tolerance_used) for one output judged by its digest (dtypes are checked by
    the caller: a float64 reference digests the problem's native dtype)."""
    if got.get("shape") != want.get("shape"):
        return False, f"output {index} has shape {got.get('shape')}, expected {want.get('shape')}", 0.0, 0.0, 0.0
    if got.get("position_seed") != want.get("position_seed") or not torch.equal(got["positions"], want["positions"]):
        return False, f"output {index}: the digest was taken at other positions than asked (tampered)", 0.0, 0.0, 0.0
    if int(got.get("nonfinite", 0)):
        return False, f"output {index} contains {got['nonfinite']} NaN/Inf value(s); NaN/Inf never pass", 0.0, 0.0, 0.0
    g, w = got["samples"], want["samples"]
    if g.shape != w.shape:
        return False, f"output {index}: its digest does not match the reference's (tampered)", 0.0, 0.0, 0.0
    if not (w.is_floating_point() or w.is_complex()):
        wrong = int((g != w).sum())
        ok = wrong == 0 and torch.equal(got["sums"], want["sums"])
        reason = "" if ok else (f"output {index}: {wrong} of {g.numel()} sampled {got['dtype']} values differ (integer "
                                "and bool outputs must match exactly)" if wrong else
                                f"output {index}: its block sums differ from the reference's (integer outputs must "
                                "match exactly)")
        return ok, reason, 0.0, 0.0, 0.0
    gs, ws = g.to(torch.float64), w.to(torch.float64)
    diff = (gs - ws).abs()
    limit = atol + rtol * ws.abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / ws.abs().clamp_min(1e-12)).max()) if diff.numel() else 0.0
    used = float((diff / limit.clamp_min(1e-30)).max()) if diff.numel() and (atol or rtol) else 0.0
    if diff.numel() and not bool((diff <= limit).all()):
        count = int((diff > limit).sum())
        return False, (f"output {index}: {count} of {g.numel()} sampled values (of {got['numel']}) outside atol={atol} "
                       f"rtol={rtol} (max abs error {max_abs:.3g}, max rel error {max_rel:.3g})"), max_abs, max_rel, used
    sizes = torch.full_like(want["sums"], float(CHUNK))
    if sizes.numel():
        sizes[-1] = got["numel"] - CHUNK * (sizes.numel() - 1)
    bound = atol * sizes + rtol * want["abs_sums"]
    bound = bound + 1e-9 * want["abs_sums"] + 1e-12  # float64 summation order
    for name in ("sums", "abs_sums"):
        off = (got[name] - want[name]).abs() > bound
        if bool(off.any()):
            block = int(off.nonzero()[0])
            return False, (f"output {index}: elements {block * CHUNK} to {min(got['numel'], (block + 1) * CHUNK) - 1} "
                           f"(flattened) differ from the reference by more than the tolerance allows on average "
                           f"({int(off.sum())} of {off.numel()} blocks of {CHUNK})"), max_abs, max_rel, used
    return True, "", max_abs, max_rel, used
