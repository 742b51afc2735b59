"""torch.compile's compiles step out of the shared device lock (kernels.child.device_lock): a timer waiting for the device
goes ahead while another child compiles on the host, a compile that benchmarks on the device takes it back first,
an exclusive (timed) holder never lets go, and with the setting off nothing changes."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernels import EvalSettings, evaluate
from kernels.child import compile_aside
from kernels.child.device_lock import RELEASES, TAKES, DeviceHold
from kernels.parent.isolation.lock_broker import compile_aside_wanted, parse_where
from tests.kernels.conftest import fixture_source

ROOT = Path(__file__).resolve().parents[2]


def open_lock(tmp_path: Path) -> tuple[int, int]:
    return (os.open(tmp_path / "device.lock", os.O_RDONLY | os.O_CREAT, 0o644),
            os.open(tmp_path / "device.lock.gate", os.O_RDONLY | os.O_CREAT, 0o644))


def free_for(mode: int, tmp_path: Path) -> bool:
    """Whether another holder could take the device lock in `mode` right now (and let it go again)."""
    fd = os.open(tmp_path / "device.lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_a_shared_holder_steps_aside_while_it_compiles_and_takes_the_device_back_after(tmp_path: Path) -> None:
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    with hold.shared():
        assert not free_for(fcntl.LOCK_EX, tmp_path)
        hold.compile_started()
        assert free_for(fcntl.LOCK_EX, tmp_path), "a timer could not go ahead while this compiled"
        hold.compile_ended()
        assert not free_for(fcntl.LOCK_EX, tmp_path), "the device was not taken back after the compile"
    assert free_for(fcntl.LOCK_EX, tmp_path)
    facts = hold.facts()
    assert facts["compiles"] == 1 and facts["took_back"] == 0 and facts["waits"] == 0 and facts["aside_s"] >= 0


def test_a_compile_that_benchmarks_takes_the_device_back_for_the_rest_of_it(tmp_path: Path) -> None:
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    with hold.shared():
        hold.compile_started()
        assert free_for(fcntl.LOCK_EX, tmp_path)
        hold.benchmarking()  # max-autotune measures its choices on the device
        assert not free_for(fcntl.LOCK_EX, tmp_path)
        hold.benchmarking()  # a second measurement: already held
        hold.compile_ended()
        assert not free_for(fcntl.LOCK_EX, tmp_path)
    assert hold.facts()["took_back"] == 1


def test_a_compile_steps_aside_again_once_its_measurement_is_over(tmp_path: Path) -> None:
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    with hold.shared():
        hold.compile_started()
        hold.benchmarking()  # pad_mm measures: the device is taken back
        hold.benchmarking()  # an inner call of the same measurement
        hold.benchmarked()
        assert not free_for(fcntl.LOCK_EX, tmp_path), "the device was let go in the middle of a measurement"
        hold.benchmarked()
        assert free_for(fcntl.LOCK_EX, tmp_path), "the rest of the compile held the device"
        hold.compile_ended()
        assert not free_for(fcntl.LOCK_EX, tmp_path)
    assert free_for(fcntl.LOCK_EX, tmp_path)
    assert hold.facts()["took_back"] == 1


def test_autotuning_measures_with_the_device_alone_then_goes_on_as_it_was_held(tmp_path: Path) -> None:
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    with hold.shared():
        hold.compile_started()
        with hold.autotuning_alone():  # max-autotune's benchmark of every choice of one GEMM
            assert not free_for(fcntl.LOCK_SH, tmp_path), "autotuning measured beside other device work"
            hold.benchmarking()  # the benchmarker's own calls inside it change nothing
            with hold.autotuning_alone():  # an inner entry point of the same benchmark
                pass
            assert not free_for(fcntl.LOCK_SH, tmp_path)
        assert free_for(fcntl.LOCK_EX, tmp_path), "the compile did not go on aside after autotuning"
        hold.compile_ended()
        with hold.autotuning_alone():  # from a shared hold (a compile that took the device back)
            assert not free_for(fcntl.LOCK_SH, tmp_path)
        assert free_for(fcntl.LOCK_SH, tmp_path) and not free_for(fcntl.LOCK_EX, tmp_path), "not shared again"
        with hold.autotuning_alone():  # a Triton kernel's configs at its first run, which some torch versions
            hold.compile_started()     # also announce as a compile: still alone
            assert not free_for(fcntl.LOCK_SH, tmp_path), "the autotuning let go of the device"
            hold.compile_ended()
    with hold.autotuning_alone():  # a compile outside any hold (at import): alone, then nothing held
        assert not free_for(fcntl.LOCK_SH, tmp_path)
    assert free_for(fcntl.LOCK_EX, tmp_path)
    facts = hold.facts()
    assert facts["autotunes_alone"] == 4 and facts["compiles"] == 1 and facts["took_back"] == 0, facts


def test_only_host_side_compiles_step_aside_never_a_cuda_graph_recording(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Dynamo's callbacks also announce CUDA graph recordings (device work, at run time): those keep the hold."""
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    monkeypatch.setitem(compile_aside._state, "hold", hold)

    def args(trigger: str) -> SimpleNamespace:  # torch._dynamo.callback.CallbackArgs
        return SimpleNamespace(callback_trigger=SimpleNamespace(name=trigger), compile_id="0/0")

    with hold.shared():
        compile_aside._on_compile_start(args("CUDAGRAPH_RECORDING"))
        assert not free_for(fcntl.LOCK_EX, tmp_path), "a CUDA graph recording let go of the device"
        compile_aside._on_compile_end(args("CUDAGRAPH_RECORDING"))
        compile_aside._on_compile_start(args("DYNAMO"))
        assert free_for(fcntl.LOCK_EX, tmp_path)
        compile_aside._on_compile_end(args("DYNAMO"))
        assert not free_for(fcntl.LOCK_EX, tmp_path)
        compile_aside._on_compile_start()  # a torch whose callbacks take no arguments: a compile
        assert free_for(fcntl.LOCK_EX, tmp_path)
        compile_aside._on_compile_end()
    assert hold.facts()["compiles"] == 2


def test_an_exclusive_holder_and_a_hold_with_the_setting_off_never_step_aside(tmp_path: Path) -> None:
    timed = DeviceHold(*open_lock(tmp_path), aside=True)
    with timed.exclusive():
        timed.compile_started()  # a recompile while timing: still timed alone
        assert not free_for(fcntl.LOCK_SH, tmp_path)
        timed.compile_ended()
    off = DeviceHold(*open_lock(tmp_path), aside=False)
    with off.shared():
        off.compile_started()
        assert not free_for(fcntl.LOCK_EX, tmp_path)
        off.compile_ended()
    alone = DeviceHold(*open_lock(tmp_path), aside=True, alone=True)  # a rerun after device_busy
    with alone.shared():
        alone.compile_started()
        assert not free_for(fcntl.LOCK_SH, tmp_path)
        alone.compile_ended()
    assert timed.facts() == off.facts() == alone.facts() == {}


def test_taking_the_device_back_waits_for_a_timer_that_went_ahead(tmp_path: Path) -> None:
    waits: list[tuple[bool, float]] = []
    hold = DeviceHold(*open_lock(tmp_path), aside=True, on_wait=lambda waiting: waits.append((waiting, time.monotonic())))
    timer_fd = open_lock(tmp_path)
    released: list[float] = []
    with hold.shared():
        hold.compile_started()
        fcntl.flock(timer_fd[0], fcntl.LOCK_EX)  # a timer takes the device while this compiles

        def release_later() -> None:
            time.sleep(0.5)
            released.append(time.monotonic())
            fcntl.flock(timer_fd[0], fcntl.LOCK_UN)

        thread = threading.Thread(target=release_later)
        thread.start()
        hold.compile_ended()  # blocks until the timer is done
        back = time.monotonic()
        thread.join()
        assert not free_for(fcntl.LOCK_EX, tmp_path)
    for fd in timer_fd:
        os.close(fd)
    assert [w for w, _ in waits] == [True, False] and back >= released[0]
    assert hold.facts()["waits"] == 1


def test_between_two_trials_a_waiting_timer_times_before_the_shared_holder_goes_on(tmp_path: Path) -> None:
    from kernels.child.device_lock import FdLock

    hold = DeviceHold(*open_lock(tmp_path))
    timer = FdLock(*open_lock(tmp_path))
    order: list[str] = []
    with hold.shared():
        order.append("trial 1")

        def time_it() -> None:
            timer.take(fcntl.LOCK_EX)  # waits at the gate: new shared takers now wait behind it
            order.append("timed")
            timer.release()

        thread = threading.Thread(target=time_it)
        thread.start()
        deadline = time.monotonic() + 5
        while free_for(fcntl.LOCK_SH, tmp_path) and time.monotonic() < deadline:  # until the timer holds the gate
            fd = os.open(tmp_path / "device.lock.gate", os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                break
            finally:
                os.close(fd)
            time.sleep(0.01)
        hold.let_timers_in()
        order.append("trial 2")
        thread.join(5)
        assert not free_for(fcntl.LOCK_EX, tmp_path), "the shared side was not taken back"
    assert order == ["trial 1", "timed", "trial 2"]
    assert hold.yields == 1  # (waits is 0 or 1: the timer may be done before this child asks again)


def test_host_work_gives_the_shared_side_back_and_takes_it_again(tmp_path: Path) -> None:
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    with hold.shared():
        with hold.off_device():  # saving the outputs: a timer may go meanwhile
            assert free_for(fcntl.LOCK_EX, tmp_path)
            hold.compile_started()  # nothing to step out of: the lock is already free
            hold.let_timers_in()
            assert hold.compiles == 0 and hold.yields == 0
        assert not free_for(fcntl.LOCK_EX, tmp_path), "the shared side was not taken again for the device work after"
        assert free_for(fcntl.LOCK_SH, tmp_path)
        with hold.off_device(then_hold=False):  # the last thing in the block: the lock stays free to its end
            pass
        assert free_for(fcntl.LOCK_EX, tmp_path)
    assert free_for(fcntl.LOCK_EX, tmp_path) and hold.offs == 2 and hold.held is None and not hold.freed
    with pytest.raises(RuntimeError), hold.shared(), hold.off_device():
        raise RuntimeError("the save failed")  # nothing taken again on the way out, nothing released twice
    assert free_for(fcntl.LOCK_EX, tmp_path) and not hold.freed


def test_host_work_keeps_a_hold_that_is_not_a_plain_shared_one(tmp_path: Path) -> None:
    alone = DeviceHold(*open_lock(tmp_path), alone=True)  # a rerun after device_busy holds the device throughout
    with alone.shared(), alone.off_device():
        assert not free_for(fcntl.LOCK_SH, tmp_path)
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    with hold.exclusive(), hold.off_device():
        assert not free_for(fcntl.LOCK_SH, tmp_path)
    with hold.shared():
        hold.compile_started()
        with hold.off_device():  # stepped aside already: the compile takes the device back, not this
            assert free_for(fcntl.LOCK_EX, tmp_path)
        hold.compile_ended()
        assert not free_for(fcntl.LOCK_EX, tmp_path)
    assert alone.offs == 0 and hold.offs == 0 and free_for(fcntl.LOCK_EX, tmp_path)


def test_letting_timers_in_needs_a_plain_shared_hold(tmp_path: Path) -> None:
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    hold.let_timers_in()  # nothing held: nothing to give back
    with hold.exclusive():
        hold.let_timers_in()  # a timed holder never lets go
        assert not free_for(fcntl.LOCK_SH, tmp_path)
    with hold.shared():
        hold.compile_started()
        hold.let_timers_in()  # stepped aside already: the lock stays free
        assert free_for(fcntl.LOCK_EX, tmp_path)
        hold.compile_ended()
    assert hold.yields == 0


def test_after_timing_autotuning_shares_the_device(tmp_path: Path) -> None:
    hold = DeviceHold(*open_lock(tmp_path), aside=True)
    hold.timed = True  # the fuzzing variants of a max-autotune candidate recompile and tune again
    with hold.shared(), hold.autotuning_alone():
        assert free_for(fcntl.LOCK_SH, tmp_path), "a choice that changes no figure took the device alone"
        assert not free_for(fcntl.LOCK_EX, tmp_path)
    assert hold.autotunes_alone == 0


def test_the_setting_is_on_for_cuda_only_unless_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STARK_COMPILE_ASIDE", raising=False)
    assert compile_aside_wanted("cuda") and compile_aside_wanted("cuda:1") and not compile_aside_wanted("cpu")
    monkeypatch.setenv("STARK_COMPILE_ASIDE", "1")
    assert compile_aside_wanted("cpu")
    monkeypatch.setenv("STARK_COMPILE_ASIDE", "0")
    assert not compile_aside_wanted("cuda")
    monkeypatch.setenv("STARK_COMPILE_ASIDE", "sometimes")
    with pytest.raises(ValueError, match="STARK_COMPILE_ASIDE='sometimes' must be 1, 0 or auto"):
        compile_aside_wanted("cuda")


HOOKED = textwrap.dedent("""
    import fcntl, inspect, json, os, sys
    import torch
    from kernels.child.compile_aside import watch_compiles
    from kernels.child.device_lock import DeviceHold
    lock = sys.argv[1]
    fds = [os.open(path, os.O_RDONLY | os.O_CREAT, 0o644) for path in (lock, lock + ".gate")]
    hold = DeviceHold(*fds, aside=True)
    watch_compiles(hold)  # before torch._dynamo is imported: the import hook installs the callbacks
    assert "torch._dynamo" not in sys.modules

    def free():
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    seen = []
    from kernels.child import compile_aside
    from torch._inductor import select_algorithm
    Cache = select_algorithm.AlgorithmSelectorCache
    assert vars(Cache)["benchmark_choices"].__func__.__wrapped__  # hooked as it was imported
    from torch._inductor.runtime import triton_heuristics
    assert vars(triton_heuristics.CachingAutotuner)["benchmark_all_configs"].__wrapped__
    # observe one autotuned op's benchmark of all its choices from inside: a probe in its place, hooked the same way
    Cache.benchmark_choices = classmethod(lambda cls, choices, args: seen.append(["autotuning", free()]) or {})
    compile_aside._state["autotuning"] = False
    compile_aside._wrap_autotuning()

    def backend(gm, example_inputs):  # runs inside Dynamo's compile, between its start and end callbacks
        seen.append(free())
        Cache.benchmark_choices([], None)
        from torch._inductor.runtime.benchmarking import benchmarker
        benchmarker.benchmark_cpu(lambda: None, warmup=1, rep=1)  # another measurement (pad_mm's kind)
        seen.append(free())
        return gm.forward

    with hold.shared():
        fn = torch.compile(lambda x: torch.relu(x) * 2, backend=backend)
        out = fn(torch.randn(8))
        seen.append(free())
    assert torch.equal(out, torch.relu(out / 2) * 2)
    assert inspect.getsource(torch._dynamo.convert_frame).startswith(("#", '"', "import", "from"))
    # Triton's compile, wherever it is looked up, gives the shared side back while it runs (and takes it again
    # even when it raises: a caller such as Inductor's autotuning may catch the error and go on)
    import triton, triton.compiler, triton.compiler.compiler as compiler
    assert triton.compile is triton.compiler.compile is compiler.compile
    assert compiler.compile.__wrapped__.__module__ == "triton.compiler.compiler"
    compiler.compile.__wrapped__.__globals__  # the original stays reachable
    with hold.shared():
        try:
            triton.compile(None)
        except Exception as exc:
            seen.append(["raised", type(exc).__name__, free()])
    print(json.dumps({"seen": seen, "facts": hold.facts()}))
""")


@pytest.mark.slow
def test_dynamo_imported_later_steps_aside_autotuning_runs_alone_and_a_measurement_takes_the_device_back(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", HOOKED, str(tmp_path / "device.lock")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    # free during the compile, alone while autotuning, aside again after a measurement, held after the compile
    assert found["seen"][:4] == [True, ["autotuning", False], True, False], proc.stdout
    assert found["seen"][4][0] == "raised" and found["seen"][4][2] is False, proc.stdout  # held again after it
    facts = found["facts"]
    assert facts["compiles"] == 1 and facts["took_back"] == 1 and facts["autotunes_alone"] == 1, proc.stdout


@pytest.mark.slow
def test_a_timer_goes_ahead_while_a_candidate_compiles(fast_settings: EvalSettings, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The real harness on the CPU with the setting forced on: while the torch.compile candidate's child compiles,
    a timer takes the device lock exclusively; the child waits for it only to take the device back ("waiting for
    the device" again), then passes, its result saying what stepped aside."""
    monkeypatch.setenv("STARK_COMPILE_ASIDE", "1")
    # warm children (no bubblewrap: the lock is the subject); a cache of its own, without any compile seed
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, sandbox="none")
    from kernels.parent import cache

    lock = cache.device_lock(cache.cache_root(settings.cache_dir), settings.device)
    lock.parent.mkdir(parents=True, exist_ok=True)
    phases: list[str] = []
    grabbed = threading.Event()
    child_waited = threading.Event()
    state: dict[str, object] = {}

    def progress(name: str, _detail: dict[str, object]) -> None:
        phases.append(name)
        if grabbed.is_set() and name == "waiting for the device":
            child_waited.set()
        elif name == "build" and phases.count("build") == 2 and "timer" not in state:
            # the second "build": the candidate's first call (it compiles), after its import and its shared hold
            state["timer"] = threading.Thread(target=timer, args=(len(phases),))
            state["timer"].start()  # type: ignore[attr-defined]

    def timer(at_phase: int) -> None:
        fd = os.open(lock, os.O_RDONLY)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # the child compiles under its first forward(): try to go ahead
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    time.sleep(0.02)
                    continue
                state["grabbed_in"] = phases[at_phase:]
                grabbed.set()
                child_waited.wait(120)  # hold the device until the child, done compiling, waits to take it back
                break
        finally:
            os.close(fd)

    result = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_compile"), settings,
                      progress=progress)
    state["timer"].join(10)  # type: ignore[attr-defined]
    assert result.verdict == "pass", result.reasons
    assert grabbed.is_set(), f"the timer never got the device while the candidate compiled: {phases}"
    assert "correctness" not in state["grabbed_in"], f"the timer went only after the compile: {phases}"  # type: ignore[operator]
    assert child_waited.is_set(), phases
    aside = result.environment["compile_aside"]
    assert aside["compiles"] >= 1 and aside["aside_s"] > 0 and aside["waits"] >= 1, aside
    assert set(aside) == {"compiles", "aside_s", "took_back", "autotunes_alone", "alone_s", "waits", "yields", "errors"}
    # torch.compile's back end was imported before the child's first hold (kernels.child.bring_up), not under it
    assert result.environment["bring_up"]["done"] == ["compiler"], result.environment


@pytest.mark.slow
def test_with_the_setting_off_a_compile_keeps_its_shared_hold(fast_settings: EvalSettings, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STARK_COMPILE_ASIDE", "0")
    monkeypatch.setenv("STARK_LOCK_TRACE", str(tmp_path / "lock.trace"))
    monkeypatch.setenv("STARK_BRING_UP", "0")  # and nothing brought up before the first hold
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, sandbox="none")  # warm, as above
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_compile"), settings)
    assert result.verdict == "pass", result.reasons
    assert "compile_aside" not in result.environment and "bring_up" not in result.environment, result.environment
    # The lock trace names the child's phase at each event, as the parent's deadlines know it, and a release every
    # phase the hold saw (benchmarks/kb_throughput.py attributes a hold to them; a timer asks before "timing").
    lines = [line.split() for line in (tmp_path / "lock.trace").read_text().splitlines()]
    assert lines and all(len(parts) in (6, 7) for parts in lines), lines
    # each line names why the child took or let go (kernels.child.device_lock TAKES / RELEASES); the release of a
    # long hold where the child was meanwhile: here the compile, inside the first call, under the shared side
    assert {parts[5] for parts in lines if parts[2] == "grant"} <= set(TAKES), lines
    assert {parts[5] for parts in lines if parts[2] == "release"} <= set(RELEASES), lines
    compiled = [parts for parts in lines if parts[2] == "release" and parts[4] == "run+first_call"]
    assert compiled and len(compiled[0]) == 7, compiled
    sites = [where for where, _ in parse_where(compiled[0][6])]
    assert any(w.startswith("kernels/child/candidate.py:") and "torch/" in w for w in sites), sites
    grants = {(parts[3], parts[4]) for parts in lines if parts[2] == "grant"}
    assert ("shared", "build") in grants and ("shared", "recheck") in grants, grants
    assert any(mode == "exclusive" and phase in ("run", "timing") for mode, phase in grants), grants
    released = [parts[4].split("+") for parts in lines if parts[2] == "release" and parts[3] == "shared"]
    # the first call's hold went on into the correctness trials; a hold retaken between trials is in "run" alone
    assert ["run", "first_call"] in released and ["run"] in released, released
