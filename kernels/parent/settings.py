"""Evaluation settings: one typed, JSON round-trippable value object, recorded with every result.

Settings (all optional; defaults in brackets):
- device ["cpu"]: "cpu", "cuda" or "cuda:N".
- correctness_trials [5]: trials, each on fresh random inputs under its own recorded seed.
- timing_runs [100], warmup_runs [10]: the timing protocol (see kernels/child/timing.py).
- atol, rtol [1e-2]: tolerances (KernelBench's), recorded with the result.
- baselines [eager, compile, compile-max-autotune]: reference timings; () skips them (torch.compile costs
  10-60 s on CPU, once per problem, then cached).
- build_timeout_s [300]: wall time for starting, importing and building the candidate, and again for
  constructing ModelNew with its first forward() (where torch.compile, Triton and other JIT compilers build).
- run_timeout_s [120]: wall time for each later phase (the other correctness trials and probes, timing).
- memory_limit_mb [a share of this machine's memory: MEMORY_SHARE of MemTotal, at least 4096; 8192 where the
  total cannot be read]: memory of the worker's process group (polled; proportional set sizes, so libraries
  shared by torch.compile's compiler workers count once), plus RLIMIT_AS on CPU. The default follows the machine
  the settings are made on (a 24 GB host gets 14 GB, enough for a 2 GB-input problem on the CPU); results say
  where the number came from (`environment.memory_limit`).
- disk_limit_mb [None = memory_limit_mb]: what one child may write to its work directory, which holds its /tmp,
  $HOME and build caches (polled like memory; RLIMIT_FSIZE caps each file at it too). /tmp is on disk in the
  work dir rather than a tmpfs, so writes there never escape into host memory; all of it is removed afterwards.
- seed [0]: base seed; trial seeds derive from it (`trial_seeds`), so a failure can be replayed.
- reference_dtype ["native"]: "float64" compares against a float64 reference.
- flush_cache [True]: flush L2 (CUDA) / the last-level cache (CPU) before every timed run.
- sandbox [$STARK_SANDBOX or "auto"]: "auto" (bubblewrap where it works), "bwrap" (required), "none" (no bubblewrap:
  children fork from the warm-start zygote; the operator's choice for the workers, e.g. a host without user
  namespaces, where "auto" would try bubblewrap on every child). The other
  layers (a dedicated uid when the harness runs as root, rlimits, no inherited fds, the disk budget) apply in every
  mode; kernels/parent/isolation/layers.py says what each layer gives, results record which were active.
- roofline [True]: measure device ceilings (once, cached) and report roofline figures and the flag.
- roofline_margin [None]: a time faster than the roofline bound by more than this factor is flagged; None
  means 1.25 on CUDA and 3.0 on CPU (CPU ceilings are noisy, and write-only work can beat the copy rate).
- precision_flag_fraction [0.05]: flag "precision_lowered" when float32 outputs use more than this share of
  the tolerance.
- unstable_timing_fraction [0.25]: flag "timing_unstable" when the timed runs' interquartile range is more than
  this share of their median (with at least 20 runs): the device or host was busy while timing, so the time and
  its speed-ups are not to be trusted until re-timed alone.
- cache_dir [None]: caches (reference outputs, baselines, ceilings, builds); None means $STARK_CACHE_DIR or
  var/cache/kernels under the working directory.
- reuse_results [True]: return the stored result of an identical evaluation (same problem, candidate,
  settings, device, torch); only pass/incorrect/rejected/build_error results are stored. Turn it off to re-time.
- exclusive_device [True]: concurrent evaluations on the same device never time while another uses it: timed work
  (timing loops, the re-check, baseline timing, ceilings) holds an flock on `<cache_dir>/locks/device-<device>.lock`
  alone, untimed device work (first calls with their JIT compiles, trials, probes, reference outputs) shares it,
  and a waiting timer keeps new sharers out. So parallel searches or several workers on one GPU do not disturb each
  other's timings, while their compiles still overlap. The waits have their own deadline (an hour).
- full_output_limit_mb [16]: outputs of one forward() up to this size are kept whole and compared elementwise;
  larger ones (KernelBench's 6.4 GB elementwise problems) are judged by digests taken on the device
  (kernels/shared/digest.py: a secret random sample of elements checked elementwise plus float64 sums of every block of
  1024 elements), so nothing the size of the outputs passes through host memory or disk.
- warm_start [True]: where a child runs without bubblewrap (GPU hosts in containers, sandbox "none"), fork it
  from a warm zygote that has already imported torch and the harness (kernels/parent/isolation/zygote.py) instead of starting a new
  interpreter: the same isolation otherwise (own process and session, clean environment, the zygote never touches
  the device), seconds less per child.
- profile [True]: after timing, profile a few calls of the forward with torch.profiler (kernels/shared/profile.py): the
  top kernels (CUDA) or ops (CPU) by time with their share and achieved rates, stored as `profile` in the result.
  Never inside the timed loop; a profiler failure is recorded, never a verdict.
- profile_deadline_s [10]: the profiled calls must fit this, capped at run_timeout_s (planned from the timed
  median; none when even one would not fit: the profile says so).
- ncu [$STARK_NCU == "1"]: on CUDA, run the candidate once more under Nsight Compute (`ncu`, where it is on PATH and
  may read the GPU's counters) and attach per-kernel DRAM/SM throughput, achieved occupancy and duration to
  `profile.ncu` (kernels/parent/ncu.py); a clear note instead where ncu is missing or not permitted.
- fuzz ["standard"]: the fuzzing stage after the correctness trials (kernels/parent/fuzz.py, docs/fuzzing.md): "off",
  "standard" (one variant per value distribution, special value, size, layout, re-drawn parameters and partial
  change) or "thorough" (more of each, three seeds). A candidate that fails a variant is `incorrect`, naming the
  variant and its seed.
- fuzz_seed [None = seed]: the seed of the fuzzing stage's variants (replay one with `python -m kernels fuzz`).
- extra [{}]: free-form annotations carried along with the result (not interpreted).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

MAX_DEVICE_INDEX = 63  # no host has more GPUs; a bigger index is a typo (or an attack on int parsing)
_DEVICE = re.compile(r"cpu|cuda(?::(\d{1,3}))?", re.ASCII)
BASELINE_KINDS = ("eager", "compile", "compile-max-autotune")
SANDBOX_MODES = ("auto", "bwrap", "none")


def default_sandbox() -> str:
    """The sandbox mode where none is given: $STARK_SANDBOX (the operator's, for every worker), else "auto"."""
    return os.environ.get("STARK_SANDBOX") or "auto"
REFERENCE_DTYPES = ("native", "float64")
FUZZ_LEVELS = ("off", "standard", "thorough")
MEMORY_SHARE = 0.6  # of the machine's memory, for one harness child by default (the parent and the OS keep the rest)
MIN_DEFAULT_MEMORY_MB = 4096
FALLBACK_MEMORY_MB = 8192


def machine_memory_mb() -> int | None:
    """This machine's memory (MemTotal), or None where /proc/meminfo cannot be read."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_memory_limit_mb() -> int:
    """MEMORY_SHARE of this machine's memory (at least MIN_DEFAULT_MEMORY_MB), or FALLBACK_MEMORY_MB."""
    total = machine_memory_mb()
    return max(MIN_DEFAULT_MEMORY_MB, int(total * MEMORY_SHARE)) if total else FALLBACK_MEMORY_MB


def memory_limit_source(limit_mb: int) -> str:
    """Where a memory limit came from, in words (recorded in results as environment.memory_limit)."""
    total = machine_memory_mb()
    if limit_mb == default_memory_limit_mb():
        if total:
            return (f"{limit_mb} MB: the default, {MEMORY_SHARE:.0%} of this machine's {total} MB "
                    f"(at least {MIN_DEFAULT_MEMORY_MB} MB)")
        return f"{limit_mb} MB: the default where the machine's memory cannot be read"
    return f"{limit_mb} MB: set for this evaluation" + (f" (this machine has {total} MB)" if total else "")


def device_problem(device: str) -> str | None:
    """None for "cpu", "cuda" or "cuda:N" (0 <= N <= MAX_DEVICE_INDEX); otherwise what is wrong, with the fix.
    The one check of device names (EvalSettings, the CLIs and the web service use it)."""
    match = _DEVICE.fullmatch(str(device))
    if match is None:
        return f"{str(device)[:40]!r} is not a device; use 'cpu', 'cuda' or 'cuda:N'"
    if match.group(1) is not None and int(match.group(1)) > MAX_DEVICE_INDEX:
        return f"{device!r}: the GPU index must be 0 to {MAX_DEVICE_INDEX}"
    return None


@dataclass(frozen=True)
class EvalSettings:
    """How one candidate is judged. Unknown keys in `from_dict` raise ValueError (typos never pass silently)."""

    device: str = "cpu"
    correctness_trials: int = 5
    timing_runs: int = 100
    warmup_runs: int = 10
    atol: float = 1e-2
    rtol: float = 1e-2
    baselines: tuple[str, ...] = BASELINE_KINDS
    build_timeout_s: float = 300.0
    run_timeout_s: float = 120.0
    memory_limit_mb: int = field(default_factory=default_memory_limit_mb)
    disk_limit_mb: int | None = None
    seed: int = 0
    reference_dtype: str = "native"
    flush_cache: bool = True
    sandbox: str = field(default_factory=lambda: default_sandbox())
    roofline: bool = True
    roofline_margin: float | None = None
    precision_flag_fraction: float = 0.05
    unstable_timing_fraction: float = 0.25
    cache_dir: str | None = None
    reuse_results: bool = True
    exclusive_device: bool = True
    full_output_limit_mb: float = 16.0
    warm_start: bool = True
    profile: bool = True
    profile_deadline_s: float = 10.0
    ncu: bool = field(default_factory=lambda: os.environ.get("STARK_NCU", "") == "1")
    fuzz: str = "standard"
    fuzz_seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.baselines, list):
            object.__setattr__(self, "baselines", tuple(self.baselines))
        problem = device_problem(self.device)
        if problem:
            raise ValueError(f"device {problem}")
        for name in ("correctness_trials", "timing_runs"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.warmup_runs < 0:
            raise ValueError(f"warmup_runs must be >= 0, got {self.warmup_runs}")
        if self.atol < 0 or self.rtol < 0:
            raise ValueError(f"atol and rtol must be >= 0, got atol={self.atol} rtol={self.rtol}")
        bad = [b for b in self.baselines if b not in BASELINE_KINDS]
        if bad:
            raise ValueError(f"unknown baseline(s) {bad}; choose from {list(BASELINE_KINDS)}")
        if self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"sandbox {self.sandbox!r} is not one of {list(SANDBOX_MODES)} (the default comes from "
                             "$STARK_SANDBOX where that is set: set it to one of them, or unset it)")
        if self.reference_dtype not in REFERENCE_DTYPES:
            raise ValueError(f"reference_dtype {self.reference_dtype!r} is not one of {list(REFERENCE_DTYPES)}")
        if self.fuzz not in FUZZ_LEVELS:
            raise ValueError(f"fuzz {self.fuzz!r} is not one of {list(FUZZ_LEVELS)}")
        if self.fuzz_seed is not None and (isinstance(self.fuzz_seed, bool) or not isinstance(self.fuzz_seed, int)):
            raise ValueError(f"fuzz_seed must be a whole number or None, got {self.fuzz_seed!r}")
        for name in ("build_timeout_s", "run_timeout_s", "memory_limit_mb", "effective_disk_limit_mb",
                     "full_output_limit_mb", "profile_deadline_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def effective_disk_limit_mb(self) -> int:
        return self.memory_limit_mb if self.disk_limit_mb is None else self.disk_limit_mb

    @property
    def effective_roofline_margin(self) -> float:
        if self.roofline_margin is not None:
            return self.roofline_margin
        return 1.25 if self.is_cuda else 3.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["baselines"] = list(self.baselines)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EvalSettings:
        data = dict(data or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown evaluation setting(s) {unknown}; known settings: {sorted(known)}")
        return cls(**data)

    @classmethod
    def coerce(cls, value: EvalSettings | dict[str, Any] | None) -> EvalSettings:
        if isinstance(value, EvalSettings):
            return value
        return cls.from_dict(value)

    def replace(self, **changes: Any) -> EvalSettings:
        return dataclasses.replace(self, **changes)

    @property
    def full_limit_bytes(self) -> int:
        return int(self.full_output_limit_mb * (1 << 20))

    @property
    def effective_fuzz_seed(self) -> int:
        return self.seed if self.fuzz_seed is None else int(self.fuzz_seed)

    def trial_seeds(self) -> list[int]:
        """Seeds of the correctness trials, then one more for the post-timing re-check (replayable)."""
        return [self.seed * 100_003 + i + 1 for i in range(self.correctness_trials + 1)]


ON, OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def env_switch(name: str, auto: bool, auto_means: str) -> bool:
    """A harness setting read by the parent: $name "1" or "0" (on/off, true/false, yes/no), or "auto" / unset: `auto`
    (`auto_means` says what that is, for the error a bad value gets)."""
    raw = os.environ.get(name, "auto").strip().lower()
    if raw == "auto":
        return auto
    if raw in ON:
        return True
    if raw in OFF:
        return False
    raise ValueError(f"{name}={raw!r} must be 1, 0 or auto (the default: {auto_means})")


def env_count(name: str, auto: int, least: int, meaning: str) -> int:
    """A harness setting read by the parent: $name a count of at least `least`, or "auto" / unset: `auto`; a bad value
    gets an error saying it `must be {meaning}`."""
    raw = os.environ.get(name, "auto").strip().lower()
    if raw == "auto":
        return auto
    try:
        value = int(raw)
    except ValueError:
        value = least - 1
    if value < least:
        raise ValueError(f"{name}={raw!r} must be {meaning}")
    return value
