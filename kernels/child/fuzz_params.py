"""Child-side: the models of a fuzzing "params" variant (kernels.parent.fuzz_plan), re-drawn the same way in the reference's
fuzz worker and in the candidate's child.

Both models are built under the variant's seed (so randomly initialised parameters are drawn anew) while every
torch.nn module's `reset_parameters` is wrapped: after it runs, each of the module's own constant-initialised
floating parameters and buffers (a norm's weight and bias, running statistics, a bias at zero) is re-drawn around
its init value (zero: uniform in [-0.5, 0.5]; c: c x uniform in [0.5, 1.5], so a variance stays positive), from a
generator keyed by the module's class, the tensor's name and shape and its occurrence, never the global one. So a
candidate that builds the reference's modules sees the re-drawn values in its own constructor (a transposed or
folded copy it caches there is right). A parameter or buffer assigned with its final value (`nn.Parameter(torch.ones(n))`,
`register_buffer(..., torch.zeros(n))`) is re-drawn as it is assigned (torch's registration hooks), keyed by its name,
shape and occurrence, so a candidate that subclasses or mirrors the reference gets the same values before its
constructor caches anything.

The candidate's state is then matched to the reference's (`align`): an entry with the reference's name and shape,
else (2-d) its transpose, else the one reference entry whose value at the problem's own seed it had, gets the
reference's re-drawn value where it differs. What cannot be matched stays; if the candidate's outputs then differ,
it fails the variant (a kernel that hard-codes an identity parameter cannot follow a trained model's).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from kernels.child import loading

RESETS = ("reset_parameters", "_reset_parameters")


def _classes() -> list[tuple[type, str]]:
    seen: list[tuple[type, str]] = []
    stack: list[type] = [torch.nn.Module]
    visited: set[type] = set()
    while stack:
        cls = stack.pop()
        if cls in visited:
            continue
        visited.add(cls)
        stack += cls.__subclasses__()
        if cls.__module__.startswith("torch.nn"):
            seen += [(cls, name) for name in RESETS if name in vars(cls)]
    return seen


def _key_seed(seed: int, *parts: Any) -> int:
    text = ":".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "little")


def redrawn(t: torch.Tensor, seed: int, *key: Any) -> torch.Tensor | None:
    """A constant floating tensor's re-draw around its value (a new tensor); None when it is not one."""
    if not t.is_floating_point() or t.numel() == 0:
        return None
    with torch.no_grad():
        first = t.reshape(-1)[0]
        if not bool((t == first).all()):
            return None
        value = float(first)
        gen = torch.Generator().manual_seed(_key_seed(seed, *key, tuple(t.shape)))
        u = torch.rand(tuple(t.shape), generator=gen, dtype=torch.float64, device="cpu")  # under any device context
        new = (u - 0.5) if value == 0 else value * (0.5 + u)
        return new.to(device=t.device, dtype=t.dtype)


def redraw(t: torch.Tensor, seed: int, *key: Any) -> bool:
    """Re-draw a constant floating tensor around its value, in place; False when it is not one."""
    new = redrawn(t, seed, *key)
    if new is None:
        return False
    with torch.no_grad():
        t.copy_(new)
    return True


@contextlib.contextmanager
def redrawing(seed: int) -> Iterator[None]:
    """While the block runs, torch.nn modules re-draw their constant-initialised parameters and buffers after
    `reset_parameters` (restored after)."""
    counts: dict[tuple[str, str, tuple[int, ...]], int] = {}
    saved = _classes()
    originals = {(cls, name): vars(cls)[name] for cls, name in saved}

    def wrap(original: Callable[..., Any], cls: type) -> Callable[..., Any]:
        def reset(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            out = original(module, *args, **kwargs)
            for kind, items in (("p", module.named_parameters(recurse=False)),
                                ("b", module.named_buffers(recurse=False))):
                for name, t in items:
                    if t is None:
                        continue
                    key = (type(module).__name__, f"{kind}.{name}", tuple(t.shape))
                    counts[key] = counts.get(key, 0) + 1
                    redraw(t.data, seed, *key, counts[key])
            return out
        return reset

    def registered(kind: str) -> Callable[..., Any]:
        def hook(module: torch.nn.Module, name: str, value: Any) -> Any:
            # a parameter or buffer made with its final value (torch.ones, torch.zeros) when assigned: a new tensor,
            # never the one given (it may be shared with module-level code); the names, not the class, key it, so
            # a candidate subclassing or mirroring the reference gets the same values
            if not isinstance(value, torch.Tensor):
                return None
            key = ("assigned", f"{kind}.{name}", tuple(value.shape))
            counts[key] = counts.get(key, 0) + 1
            new = redrawn(value.detach(), seed, *key, counts[key])
            if new is None:
                return None
            if isinstance(value, torch.nn.Parameter):
                return torch.nn.Parameter(new, requires_grad=value.requires_grad)
            return new
        return hook

    from torch.nn.modules import module as nn_module

    handles = []
    try:
        for (cls, name), original in originals.items():
            setattr(cls, name, wrap(original, cls))
        handles = [nn_module.register_module_parameter_registration_hook(registered("p")),
                   nn_module.register_module_buffer_registration_hook(registered("b"))]
        yield
    finally:
        for handle in handles:
            handle.remove()
        for (cls, name), original in originals.items():
            setattr(cls, name, original)


def build(cls: type, args: list[Any], seed: int, device: torch.device, dtype: torch.dtype | None = None,
          reference: bool = False) -> torch.nn.Module:
    """`cls(*args)` under `seed` with the re-drawing on (`reference`: the problem's Model, said for the reader)."""
    with redrawing(seed):
        model = loading.build_model(cls, args, seed, device)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()


def state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Floating parameters and buffers by qualified name."""
    out: dict[str, torch.Tensor] = dict(model.named_parameters())
    out.update({n: b for n, b in model.named_buffers() if b is not None})
    return {n: t for n, t in out.items() if t.is_floating_point()}


def align(candidate: torch.nn.Module, redrawn: dict[str, torch.Tensor],
          original: Callable[[], dict[str, torch.Tensor]], own: dict[str, torch.Tensor]) -> int:
    """Copy the reference's re-drawn values into the candidate's matching entries where they differ; how many.
    `original()`: the reference's state at the problem's seed; `own`: the candidate's state at that seed. An entry
    matches by name (and shape, or transposed shape), else by its value at the problem's seed among the reference's
    entries no name claimed (one match only)."""
    mine = state(candidate)
    targets: dict[str, torch.Tensor] = {}
    for name, t in mine.items():
        want = redrawn.get(name)
        if want is not None and want.shape == t.shape:
            targets[name] = want
        elif want is not None and want.dim() == 2 and want.t().shape == t.shape:
            targets[name] = want.t()
    unmatched = [n for n in mine if n not in targets and n in own]
    if unmatched:
        before = {m: v for m, v in original().items() if m in redrawn and m not in targets}
        for name in unmatched:
            value = own[name]
            same = [m for m, v in before.items() if v.shape == value.shape and torch.equal(v, value)]
            turned = [m for m, v in before.items() if v.dim() == 2 and v.t().shape == value.shape
                      and torch.equal(v.t(), value)]
            if len(same) == 1 and not turned:
                targets[name] = redrawn[same[0]]
            elif len(turned) == 1 and not same:
                targets[name] = redrawn[turned[0]].t()
    copied = 0
    for name, target in targets.items():
        t = mine[name]
        if not torch.equal(target.to(t.device, t.dtype), t):
            with torch.no_grad():
                t.copy_(target.to(t.device, t.dtype))
            copied += 1
    return copied
