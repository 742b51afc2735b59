"""Every benchmark question and what answers it: a module of this package or a shell script of this folder.

`python -m benchmarks QUESTION [ARGS]` runs it (benchmarks/__main__.py); benchmarks/README.md is the index, and a test
keeps the two in step. No torch, no Django: importing this table is free."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Question:
    name: str  # the subcommand
    target: str  # a module of this package ("kb_set") or a shell script of this folder ("throughput.sh")
    asks: str  # the question, in one line
    device: str  # where it runs: "CPU", "CUDA", "CPU or CUDA", "none" (reads files), ...

    @property
    def is_script(self) -> bool:
        return self.target.endswith(".sh")

    @property
    def path(self) -> Path:
        return HERE / (self.target if self.is_script else f"{self.target}.py")


_ALL = [
    # The harness (kernels/)
    Question("harness-throughput", "kernels_throughput",
             "How many evaluations per minute, what overhead, how stable the timing, is the integrity corpus judged right?",
             "CPU or CUDA"),
    Question("eval-scale", "eval_scale",
             "How long does judging one candidate take at KernelBench scale, and where does the time go?", "CUDA"),
    Question("sandbox-overhead", "sandbox_overhead", "What do the isolation layers cost?", "CPU"),
    Question("profiling-cost", "profiling_cost", "What does torch.profiler feedback add to an evaluation?",
             "CPU or CUDA"),
    Question("profiling-gpu", "profiling_gpu.sh",
             "Do torch.profiler and Nsight Compute profiles of CUDA candidates work, and what do they cost?", "CUDA"),
    Question("fuzz-cost", "fuzz_cost", "What does the fuzzing stage add to an evaluation, and what does each level catch "
             "of a corpus of illusions and controls (`--corpus`)?", "CPU or CUDA"),
    Question("compile-seed", "compile_seed",
             "What does seeding a child with the reference worker's compiled code save?", "CPU or CUDA"),
    Question("own-seed", "own_seed",
             "What does a candidate's own compiled code save its re-evaluation and its re-time?", "CPU or CUDA"),
    Question("retime-self", "retime_self",
             "Does the side-by-side re-time show 1.00 for two identical kernels (no bias)?", "CUDA"),
    Question("quiet-timing", "quiet_timing",
             "Does a busy host move a side-by-side verdict, with and without quiet timing?", "CPU or CUDA"),
    Question("witness-check", "witness_check",
             "Does the harness's clock reject forged timing and keep forgeries from passing as faster?", "CPU or CUDA"),
    Question("watch-cost", "watch_cost", "What does watching a child's memory cost the harness parent?", "CPU"),
    Question("scale-out", "scale_out", "Does the gpu queue scale from one worker to one per GPU?", "several GPUs"),
    Question("lock-waves", "lock_waves",
             "Do compiles stepping aside from the device lock raise a batch's throughput?", "CUDA"),
    Question("lock-waits", "lock_waits",
             "In a lock trace: what did the timers wait for, and who held the device meanwhile?", "none"),
    Question("first-hold", "first_hold",
             "How long is a child's first hold of the device, with and without bringing up CUDA before it?",
             "CPU or CUDA"),
    Question("hold-after-timing", "hold_after_timing",
             "How long does a child hold the device after its timed loop (two checkouts side by side)?",
             "CPU or CUDA"),
    # A suite on one GPU
    Question("throughput", "throughput.sh",
             "Judged attempts per minute per GPU over a suite, every winner re-timed (search, then re-times)", "CUDA"),
    Question("kb-throughput", "kb_throughput",
             "From a bench's trees (and lock trace): judged attempts per minute, winners re-timed, the lock's time",
             "none"),
    Question("schedule-model", "schedule_model",
             "What would other problems-at-once, slots and parallel settings give (a bench's schedule replayed)?",
             "none"),
    Question("bench-overlap", "bench_overlap",
             "Problems one after another or side by side on a few slots: which judges more a minute?", "CPU"),
    # The rules team (search/teams/rules/)
    Question("kb-rules", "kb_rules.sh",
             "The rules team on the KernelBench-shaped set: the paper's metrics, winners re-timed", "CUDA"),
    Question("kb-retime", "kb_retime.sh", "Finished searches re-timed side by side, then the table", "CUDA"),
    Question("kb-retime-alone", "kb_retime_alone.sh", "Finished searches re-timed one tree at a time, alone on the host",
             "CUDA"),
    Question("kb-set", "kb_set", "The KernelBench-shaped set's shapes and memory (and, with --time, eager's time)",
             "none (meta device)"),
    Question("kb-table", "kb_table", "The paper's metrics of a bench, from its trees", "none"),
    Question("kb-phases", "kb_phases", "Where a bench's evaluation time went, per harness phase", "none"),
    Question("kb-rerender", "kb_rerender", "The committed kb-rules tables re-rendered from their saved trees", "none"),
    Question("rules-gpu", "rules_gpu.sh",
             "The rules team over GPU-sized sample problems of levels 1-3, benches side by side", "CUDA"),
    Question("rules-cpu", "rules_cpu", "How does each sample problem's best candidate compare with eager on the CPU?",
             "CPU"),
    Question("rules-sources", "rules_sources",
             "Are the rules team's rendered candidates byte-identical before and after a change?", "CPU"),
    Question("rules-trace-store", "rules_trace_store",
             "How many tracing children does a run's expand steps start, with and without the trace store?", "CPU"),
    Question("rules-rewrites", "rules_rewrites",
             "How fast are the exact rewrites' candidates against the reference? (render, then time)", "CPU or CUDA"),
    Question("rules-rewrites-gpu", "rules_rewrites_gpu.sh", "rules-rewrites' render and time on a GPU", "CUDA"),
    Question("rules-conv-layouts", "rules_conv_layouts.sh",
             "Do the rules team's layout moves pay off per convolution problem?", "CUDA"),
    Question("gemm-epilogue", "gemm_epilogue",
             "Do GEMM + epilogue candidates beat cuBLAS + an eager epilogue at level-2 sizes?", "CUDA (CPU: --quick)"),
    Question("conv-knobs", "conv_knobs",
             "What do cuDNN's benchmark mode, channels-last and the compile modes do to convolution problems?",
             "CUDA (CPU: smoke)"),
    Question("compile-forms", "compile_forms",
             "torch.compile of the module or of its bound forward: which is faster on convolution models?", "CUDA"),
    Question("bench-from-trees", "bench_from_trees", "A bench's JSON and Markdown rebuilt from its trees", "none"),
    Question("tree-details", "tree_details", "Per-problem details of a bench (baselines, best recipe, spreads)", "none"),
    Question("retime-trees", "retime_trees", "Finished searches re-timed side by side (reference, compile, best)",
             "CUDA"),
    Question("problems-gpu", "problems_gpu", "(a generator) GPU-sized copies of the sample problems", "none"),
    Question("gpu-smoke", "gpu_smoke.sh",
             "On a GPU host: a short rules search re-timed, the harness-bound tests, the GPU tests", "CUDA"),
    # The web app
    Question("ui-tree", "ui_tree", "How fast does the run page apply 1,000 node events, at what frame times?",
             "CPU + chromium"),
    Question("api-create-latency", "api_create_latency",
             "How long does POST /api/runs take to answer, through a real daphne?", "CPU (Redis, daphne)"),
]

QUESTIONS: dict[str, Question] = {q.name: q for q in _ALL}
