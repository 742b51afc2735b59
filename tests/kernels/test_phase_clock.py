"""The phases a user reads (kernels.parent.phases.PhaseClock), from the children's own phase names."""

from __future__ import annotations

from kernels.parent.phases import PhaseClock


def test_a_helper_workers_waits_for_the_device_count_as_waits_and_the_rest_as_its_step() -> None:
    seen: list[str] = []
    clock = PhaseClock(lambda name, _detail: seen.append(name))
    on_phase = clock.waits_apart("re-check")  # the reference digests of a re-check (kernels.parent.reference)
    for phase in ("start", "queue", "run", "queue", "run"):
        on_phase(phase)
    phases = [p["phase"] for p in clock.done()]
    assert seen == ["re-check", "waiting for the device", "re-check", "waiting for the device", "re-check", "done"]
    assert phases == ["re-check", "waiting for the device"]


def test_a_reference_workers_phases_count_as_reference_but_its_baselines() -> None:
    clock = PhaseClock()
    on_phase = clock.child(reference=True)
    for phase in ("start", "run", "baseline", "queue", "ceilings"):
        on_phase(phase)
    assert [p["phase"] for p in clock.done()] == ["reference", "baselines", "device ceilings"]


class JobMeta:
    """What PhaseBeat writes to: an RQ job's meta and its save."""

    def __init__(self) -> None:
        self.meta: dict = {}

    def save_meta(self) -> None:
        pass


def test_a_phase_entered_again_goes_on_from_its_earlier_time() -> None:
    """build -> waiting -> build (first_call is a build too): the build clock the page shows never goes back."""
    import time

    from kernels.parent.jobs import PhaseBeat

    beat = PhaseBeat()
    beat.job = JobMeta()
    clock = PhaseClock(beat)
    on_phase = clock.child()
    on_phase("build")
    time.sleep(0.15)
    beat.publish()
    first = beat.job.meta["phase"]
    on_phase("queue")
    on_phase("first_call")
    again = beat.job.meta["phase"]
    assert first["phase"] == again["phase"] == "build"
    assert again["phase_s"] >= first["phase_s"] >= 0.1
    assert "phase_before_s" not in again
