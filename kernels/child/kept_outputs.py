"""What a candidate's child keeps of its outputs for the parent to judge: host copies or on-device digests
(kernels.shared.digest), the timed runs' fresh inputs and a reservoir sample of their outputs (kernels.child.candidate
times; the parent re-checks the sample against a reference computed for the same seeds)."""

from __future__ import annotations

import os
from typing import Any

import torch

from kernels.child import loading
from kernels.shared import digest

_urandom = os.urandom  # captured before any candidate code runs
SAMPLED_RUNS = 3  # timed runs whose outputs are re-checked against the reference, chosen after each run returns


def secret_seed() -> int:
    """A seed the candidate cannot predict (drawn from the OS, not torch's or Python's generators)."""
    return int.from_bytes(_urandom(6), "little")


class Keeper:
    """What is kept of one call's outputs: host copies, or (for problems with large outputs, `task["digest"]`)
    digests taken on the device at positions drawn from fresh secret seeds after the call returned."""

    def __init__(self, use_digests: bool) -> None:
        self.use_digests = use_digests

    def seeds(self, outputs: list[torch.Tensor]) -> list[int] | None:
        return [secret_seed() for _ in outputs] if self.use_digests else None

    def keep(self, outputs: list[torch.Tensor], seeds: list[int] | None = None) -> list[Any]:
        """Keep `outputs` (under `seeds`, to re-take a digest at the same positions; fresh ones otherwise)."""
        if not self.use_digests:
            return snapshot(outputs)
        return digest.keep(outputs, seeds if seeds is not None else self.seeds(outputs), full_limit=-1)

    @staticmethod
    def seeds_of(kept: list[Any]) -> list[int] | None:
        return [k["position_seed"] for k in kept] if kept and digest.is_digest(kept[0]) else None


class TimingSampler:
    """Fresh inputs for every timed run (new secret seed, written into the same tensors, outside the timed window)
    and a reservoir sample of SAMPLED_RUNS timed outputs, each kept or not only after its run has returned."""

    def __init__(self, problem: Any, inputs: list[Any], device: torch.device, runs: int, keeper: Keeper) -> None:
        self.problem, self.inputs, self.device, self.keeper = problem, inputs, device, keeper
        self.seeds = [0] * runs
        self.kept: list[tuple[int, list[torch.Tensor]]] = []
        self.seen = 0

    def before(self, i: int) -> None:
        self.seeds[i] = secret_seed()
        fresh = loading.make_inputs(self.problem, self.seeds[i], self.device)
        for old, new in zip(self.inputs, fresh):
            if isinstance(old, torch.Tensor):
                old.copy_(new)

    def after(self, i: int, out: Any) -> None:
        self.seen += 1
        if len(self.kept) < SAMPLED_RUNS:
            self.kept.append((self.seeds[i], self.keeper.keep(loading.flatten_outputs(out))))
            return
        slot = int.from_bytes(_urandom(4), "little") % self.seen
        if slot < SAMPLED_RUNS:
            self.kept[slot] = (self.seeds[i], self.keeper.keep(loading.flatten_outputs(out)))


def snapshot(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Copies to host memory, taken on the current stream only (unsynchronized side-stream work is missed)."""
    return [o.detach().to("cpu", copy=True) for o in outputs]


def same(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if digest.is_digest(x) and digest.is_digest(y):
            if not all(same([x[k]], [y[k]]) for k in ("samples", "sums", "abs_sums")):
                return False
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point() or x.is_complex():
            if not bool(((x == y) | (x.isnan() & y.isnan())).all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True
