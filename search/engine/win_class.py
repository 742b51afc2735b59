"""What kind of win a correct attempt is: its own kernel, a compiler/library configuration, or the reference's ops.

- "custom_kernel": forward reaches a kernel the candidate writes itself: a Triton kernel (@triton.jit with
  tl.load/tl.store) launched as `kernel[grid](...)`, or a function of a torch.utils.cpp_extension module whose source
  has a CUDA kernel (`__global__` with thread indexing or shared memory) or a C++ loop of its own (CPU).
- "configuration": no such kernel does the work, but the candidate configures the compiler or a library:
  torch.compile/TorchScript, CUDA graphs, torch.backends.* (cuDNN benchmark/flags, TF32), float32 matmul precision,
  channels_last/memory_format layouts, autocast.
- "reference_equivalent": PyTorch's own ops only (the reference's, or a rewrite in other torch ops) and no
  configuration: a copy of the reference, or the harness's `no_custom_kernel` flag with nothing configured.

Modelled on KernelBench's static checker (kernel_static_checker.py: backend code required, no try/except fallback, the
torch compute ops it warns about), written here on Python's ast: the source is untrusted and is never imported or run.
Where the checks agree and differ: docs/metrics.md. Pure: no Django, no torch.
"""

from __future__ import annotations

from functools import lru_cache

from search.engine.source_ast import parse
from search.engine.source_scan import SourceScan

CUSTOM_KERNEL, CONFIGURATION, REFERENCE_EQUIVALENT = "custom_kernel", "configuration", "reference_equivalent"
CLASSES = (CUSTOM_KERNEL, CONFIGURATION, REFERENCE_EQUIVALENT)
LABELS = {CUSTOM_KERNEL: "custom kernel", CONFIGURATION: "configuration", REFERENCE_EQUIVALENT: "reference-equivalent"}
NO_CUSTOM_KERNEL = "no_custom_kernel"

def classify(source: str, flags: list[str], reference_source: str) -> str:
    """The class of a correct attempt's win (CLASSES); see class_reasons for why."""
    return class_reasons(source, flags, reference_source)[0]


def class_reasons(source: str, flags: list[str] | tuple[str, ...], reference_source: str) -> tuple[str, list[str]]:
    """(class, reasons): the class and the facts that decided it, in words the UI can show."""
    kind, reasons = _cached(source, tuple(flags or ()), reference_source)
    return kind, list(reasons)


@lru_cache(maxsize=512)
def _cached(source: str, flags: tuple[str, ...], reference_source: str) -> tuple[str, tuple[str, ...]]:
    try:
        tree = parse(source)
    except (SyntaxError, ValueError) as exc:
        return REFERENCE_EQUIVALENT, (f"the source does not parse ({exc.__class__.__name__}): no kernel can be seen",)
    scan = SourceScan(tree)
    config = sorted(scan.config_labels() - _reference_config(reference_source))
    reasons: list[str] = []
    kernels = scan.reached_kernels()
    if kernels:
        reasons.append("forward runs its own " + ", ".join(sorted(kernels)[:4]))
        torch_ops = scan.torch_compute()
        if torch_ops:
            reasons.append("PyTorch still runs " + ", ".join(sorted(torch_ops)[:4]))
    reasons += scan.notes
    if kernels and NO_CUSTOM_KERNEL in flags:
        reasons.append("but the harness's op probe saw forward call only the reference's own torch ops "
                       "(no_custom_kernel): the kernel did not run where it was judged")
        kernels = set()
    if kernels:
        if config:
            reasons.append("also configures " + ", ".join(config))
        return CUSTOM_KERNEL, tuple(reasons)
    if not scan.notes and not scan.defined_kernels:
        reasons.append("no kernel of its own (no Triton kernel, no CUDA/C++ extension)")
    if config:
        return CONFIGURATION, (*reasons, "the work is PyTorch's under " + ", ".join(config))
    if NO_CUSTOM_KERNEL in flags:
        reasons.append("the harness's op probe saw forward call only the reference's own torch ops (no_custom_kernel)")
    elif scan.inherits_reference_forward:
        reasons.append("ModelNew keeps the reference's forward")
    else:
        reasons.append("PyTorch ops only, nothing configured")
    return REFERENCE_EQUIVALENT, tuple(reasons)


@lru_cache(maxsize=64)
def _reference_config(reference_source: str) -> frozenset[str]:
    """Configuration the reference itself already has (not the attempt's doing)."""
    try:
        return frozenset(SourceScan(parse(reference_source)).config_labels())
    except (SyntaxError, ValueError):
        return frozenset()
