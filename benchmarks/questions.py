"""Every benchmark question and what answers it: a module of this package or a shell script of this folder.

`python -m benchmarks QUESTION [ARGS]` runs it (benchmarks/__main__.py); benchmarks/README.md is the index, and a test
keeps the two in step. Each question names its CPU smoke run (`smoke`: its smallest arguments on a host without a
GPU, `{out}` a fresh folder it writes its report to); a question with none needs a GPU, and its smoke run is the
clear "needs a GPU" exit (benchmarks/tests/test_smoke.py runs them all). No torch, no Django: importing this table
is free."""
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
    smoke: tuple[str, ...] | None = None  # its CPU smoke run's arguments ({out}: a fresh folder); None: needs a GPU
    report: str = "report.json"  # the JSON its smoke run writes, under {out}
    smoke_inputs: tuple[tuple[str, str], ...] = ()  # (file, its copy under {out}) made before the smoke run

    @property
    def needs_gpu(self) -> bool:
        """No run on a CPU host: `python -m benchmarks` stops it there with the "needs a GPU" exit, unless the
        command asks for the CPU (--device cpu, or DEVICE=cpu for a shell script that has a CPU mode)."""
        return self.smoke is None

    @property
    def is_script(self) -> bool:
        return self.target.endswith(".sh")

    @property
    def path(self) -> Path:
        return HERE / (self.target if self.is_script else f"{self.target}.py")


SMALL = "tests/kernels/fixtures/problem_scale_add.py"  # the smoke runs' problem: a scale and an add, milliseconds on a CPU
HONEST = "tests/kernels/fixtures/candidates/honest_torch.py"
TREES = ("benchmarks/results/rules-gpu/trees/level1__relu.json", "benchmarks/results/rules-gpu/trees/level1__softmax.json")
LOCK_TRACE = "benchmarks/results/throughput/search/lock.trace.gz"

_ALL = [
    # The harness (kernels/)
    Question("harness-throughput", "kernels_throughput",
             "How many evaluations per minute, what overhead, how stable the timing, is the integrity corpus judged right?",
             "CPU or CUDA",
             smoke=("--device", "cpu", "--quick", "--limit", "1", "--skip-corpus", "--out", "{out}"), report="cpu.json"),
    Question("eval-scale", "eval_scale",
             "How long does judging one candidate take at KernelBench scale, and where does the time go?", "CUDA"),
    Question("sandbox-overhead", "sandbox_overhead", "What do the isolation layers cost?", "CPU",
             smoke=("--repeats", "1", "--modes", "none", "--out", "{out}/report.json")),
    Question("profiling-cost", "profiling_cost", "What does torch.profiler feedback add to an evaluation?",
             "CPU or CUDA",
             smoke=("--device", "cpu", "--repeats", "1", "--runs", "3", "--problems", "relu", "--out", "{out}/report.json")),
    Question("profiling-gpu", "profiling_gpu.sh",
             "Do torch.profiler and Nsight Compute profiles of CUDA candidates work, and what do they cost?", "CUDA"),
    Question("fuzz-cost", "fuzz_cost", "What does the fuzzing stage add to an evaluation, and what does each level catch "
             "of a corpus of illusions and controls (`--corpus`)?", "CPU or CUDA",
             smoke=("--device", "cpu", "--problems", "level1/relu", "--runs", "5", "--out", "{out}/report.json")),
    Question("compile-seed", "compile_seed",
             "What does seeding a child with the reference worker's compiled code save?",
             "CUDA (CPU: --device cpu, minutes of C++ compiles)"),
    Question("own-seed", "own_seed",
             "What does a candidate's own compiled code (its torch extension builds, its compile caches) save its "
             "re-evaluation and its re-time?", "CPU or CUDA",
             smoke=("--device", "cpu", "--rounds", "1", "--out", "{out}/report.json", f"{SMALL}:{HONEST}")),
    Question("retime-self", "retime_self",
             "Does the side-by-side re-time show 1.00 for two identical kernels (no bias)?", "CUDA",
             smoke=("--device", "cpu", "--rounds", "2", "--out", "{out}/report.json", SMALL)),
    Question("quiet-timing", "quiet_timing",
             "Does a busy host move a side-by-side verdict, with and without quiet timing?", "CPU or CUDA",
             smoke=("--device", "cpu", "--repeats", "2", "--load", "1", "--parallel", "2", "--rounds", "2", "--timing-runs", "8", "--out", "{out}/report")),
    Question("witness-check", "witness_check",
             "Does the harness's clock reject forged timing and keep forgeries from passing as faster?", "CPU or CUDA",
             smoke=("--device", "cpu", "--runs", "10", "--cases", "forge_json_dumps", "--out", "{out}/report.json")),
    Question("suite-cpu", "suite_cpu", "Where does a command's CPU go (make test): by kind of process and by test?",
             "CPU", smoke=("--interval", "0.1", "--out", "{out}/report.json", "--", "python3", "-c",
                           "sum(i * i for i in range(4 * 10**6))")),
    Question("watch-cost", "watch_cost", "What does watching a child's memory cost the harness parent?", "CPU",
             smoke=("--children", "2", "--rounds", "1", "--repeats", "5", "--out", "{out}/report")),
    Question("scale-out", "scale_out", "Does the gpu queue scale from one worker to one per GPU?", "several GPUs"),
    Question("lock-waves", "lock_waves",
             "Do compiles stepping aside from the device lock raise a batch's throughput?", "CUDA"),
    Question("lock-waits", "lock_waits",
             "In a lock trace: what did the timers wait for, and who held the device meanwhile?", "none",
             smoke=(LOCK_TRACE, "--out", "{out}/report.json")),
    Question("first-hold", "first_hold",
             "How long is a child's first hold of the device, with and without bringing up CUDA before it?",
             "CUDA (CPU: --device cpu, minutes of C++ compiles)"),
    Question("hold-after-timing", "hold_after_timing",
             "How long does a child hold the device after its timed loop (two checkouts side by side)?",
             "CPU or CUDA",
             smoke=("--device", "cpu", "--rounds", "1", "--problem", SMALL, "--out", "{out}/report.json", ".")),
    # A suite on one GPU
    Question("throughput", "throughput.sh",
             "Judged attempts per minute per GPU over a suite, every winner re-timed (search, then re-times)", "CUDA"),
    Question("kb-throughput", "kb_throughput",
             "From a bench's trees (and lock trace): judged attempts per minute, winners re-timed, the lock's time",
             "none",
             smoke=(*TREES, "--lock-trace", LOCK_TRACE, "--out", "{out}/report.json")),
    Question("schedule-model", "schedule_model",
             "What would other problems-at-once, slots and parallel settings give (a bench's schedule replayed)?",
             "none",
             smoke=("benchmarks/results/rules-gpu/trees", "--at-once", "2", "--slots", "2", "--out", "{out}/report")),
    Question("bench-overlap", "bench_overlap",
             "Problems one after another or side by side on a few slots: which judges more a minute?", "CPU",
             smoke=("--budget", "1", "--at-once", "1", "--slots", "1", "--time-limit", "2", "--out", "{out}/report", SMALL)),
    # The rules team (search/teams/rules/)
    Question("kb-rules", "kb_rules.sh",
             "The rules team on the KernelBench-shaped set: the paper's metrics, winners re-timed", "CUDA"),
    Question("kb-retime", "kb_retime.sh", "Finished searches re-timed side by side, then the table", "CUDA"),
    Question("kb-retime-alone", "kb_retime_alone.sh", "Finished searches re-timed one tree at a time, alone on the host",
             "CUDA"),
    Question("kb-set", "kb_set", "The KernelBench-shaped set's shapes and memory (and, with --time, eager's time)",
             "none (meta device)",
             smoke=("--out", "{out}/report.json")),
    Question("kb-table", "kb_table", "The paper's metrics of a bench, from its trees", "none",
             smoke=("--out", "{out}/report", *TREES)),
    Question("kb-phases", "kb_phases", "Where a bench's evaluation time went, per harness phase", "none",
             smoke=("--out", "{out}/report", *TREES)),
    Question("kb-rerender", "kb_rerender", "The committed kb-rules tables re-rendered from their saved trees", "none",
             smoke=("--root", "benchmarks/results/kb-rules", "--out", "{out}"), report="kb_rules.json"),
    Question("rules-gpu", "rules_gpu.sh",
             "The rules team over GPU-sized sample problems of levels 1-3, benches side by side", "CUDA"),
    Question("rules-cpu", "rules_cpu", "How does each sample problem's best candidate compare with eager on the CPU?",
             "CPU",
             smoke=("--render", "--out", "{out}/report"),  # a search builds C++ extensions: minutes on a CPU
             smoke_inputs=(("benchmarks/results/rules-cpu/cpu.json", "report.json"),)),
    Question("rules-sources", "rules_sources",
             "Are the rules team's rendered candidates byte-identical before and after a change?", "CPU",
             smoke=("--problems", "examples:level1/relu.py", "--out", "{out}/report.json")),
    Question("rules-trace-store", "rules_trace_store",
             "How many tracing children does a run's expand steps start, with and without the trace store?", "CPU",
             smoke=("--budget", "1", "--problems", "level1/softmax.py", "--out", "{out}/report.json")),
    Question("rules-rewrites", "rules_rewrites",
             "How fast are the exact rewrites' candidates against the reference? (render, then time)", "CPU or CUDA",
             smoke=("both", "{out}/rendered", "--device", "cpu", "--runs", "3", "--rounds", "1", "--out", "{out}/report.json")),
    Question("rules-rewrites-gpu", "rules_rewrites_gpu.sh", "rules-rewrites' render and time on a GPU", "CUDA"),
    Question("rules-conv-layouts", "rules_conv_layouts.sh",
             "Do the rules team's layout moves pay off per convolution problem?", "CUDA"),
    Question("gemm-epilogue", "gemm_epilogue",
             "Do GEMM + epilogue candidates beat cuBLAS + an eager epilogue at level-2 sizes?", "CUDA (CPU: --quick)",
             smoke=("--device", "cpu", "--quick", "--no-compile", "--only", "gemm_relu_scale_add", "--out", "{out}"), report="cpu.json"),
    Question("conv-knobs", "conv_knobs",
             "What do cuDNN's benchmark mode, channels-last and the compile modes do to convolution problems?",
             "CUDA (CPU: smoke)",
             smoke=("--device", "cpu", "--workers", "1", "--forms", "eager,cl", "--out", "{out}/report.json", "examples/problems/level1/conv2d.py")),
    Question("compile-forms", "compile_forms",
             "torch.compile of the module or of its bound forward: which is faster on convolution models?", "CUDA"),
    Question("bench-from-trees", "bench_from_trees", "A bench's JSON and Markdown rebuilt from its trees", "none",
             smoke=("--out", "{out}/report.json", *TREES)),
    Question("tree-details", "tree_details", "Per-problem details of a bench (baselines, best recipe, spreads)", "none",
             smoke=("--out", "{out}/report.json", *TREES)),
    Question("retime-trees", "retime_trees", "Finished searches re-timed side by side (reference, compile, best)",
             "CUDA"),
    Question("problems-gpu", "problems_gpu", "(a generator) GPU-sized copies of the sample problems", "none",
             smoke=("--out", "{out}/report.json", "{out}/problems")),
    Question("gpu-smoke", "gpu_smoke.sh",
             "On a GPU host: a short rules search re-timed, the harness-bound tests, the GPU tests", "CUDA"),
    Question("trust-gpu", "trust_gpu.sh",
             "On a GPU host: the witness, the fuzzing stage's cost and catch rate, the GPU tests (one call)", "CUDA"),
    # The web app
    Question("ui-tree", "ui_tree", "How fast does the run page apply 1,000 node events, at what frame times?",
             "CPU + chromium",
             smoke=("--nodes", "20", "--out", "{out}"), report="cpu.json"),
    Question("api-create-latency", "api_create_latency",
             "How long does POST /api/runs take to answer, through a real daphne?", "CPU (Redis, daphne)",
             smoke=("--runs", "1", "--out", "{out}/report.json")),
]

QUESTIONS: dict[str, Question] = {q.name: q for q in _ALL}
