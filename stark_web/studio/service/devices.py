"""Which devices this instance can evaluate on, from what its live gpu-queue workers registered (the same reading as
/healthz: stark_web.studio.service.worker.worker_devices), and the check of a new run's device against them.

A device no live worker serves is refused (a 400 on `device` naming the devices available), unless the operator
lets runs wait for absent devices (STARK_QUEUE_ABSENT_DEVICES=1): the run is then created and says what it waits for.
With no live gpu worker that reported its devices (none started yet, or plain rq workers), this host's devices
stand in: `make run` starts the workers here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    devices: tuple[str, ...]  # "cpu", "cuda:0", ...
    source: str  # where the list comes from, as the user reads it

    def serves(self, device: str) -> bool:
        if device == "cuda":
            return any(d.startswith("cuda") for d in self.devices)
        if device == "cuda:0" and "cuda" in self.devices:
            return True
        return device in self.devices

    def offered(self) -> list[str]:
        """The device choices to offer: cpu, cuda (any GPU) when one is served, then each GPU."""
        gpus = [d for d in self.devices if d.startswith("cuda:")]
        return [*(["cpu"] if "cpu" in self.devices else []), *(["cuda"] if gpus or "cuda" in self.devices else []),
                *gpus]

    def text(self) -> str:
        return ", ".join(self.offered()) or "none"


def host_devices() -> tuple[str, ...]:
    """This host's devices without importing torch: the CPU, and a GPU when the NVIDIA driver's device exists."""
    return ("cpu", "cuda") if Path("/dev/nvidia0").exists() else ("cpu",)


def served() -> Served:
    """The devices the live gpu workers of this instance registered; this host's when none did (or Redis is down)."""
    try:
        from rq import Worker

        from stark_web.studio.service import queues
        from stark_web.studio.service.worker import is_alive, worker_devices

        found: set[str] = set()
        for worker in Worker.all(queue=queues.queue("gpu")):
            reported = worker_devices(worker)
            if reported and is_alive(worker):
                found.update(reported)
        if found:
            return Served(tuple(sorted(found)), "this instance's live gpu workers")
    except Exception:  # noqa: BLE001 - no Redis: the run's creation says so elsewhere; judge by this host
        log.debug("reading the gpu workers' devices failed", exc_info=True)
    return Served(host_devices(), "this host (no live gpu worker has reported its devices)")


WAITING_PREFIX = "waiting for a worker with "  # the line a run shows while no live worker serves its device


def absent_allowed() -> bool:
    return bool(getattr(settings, "STARK_QUEUE_ABSENT_DEVICES", False))


def check_device(device: str) -> str | None:
    """SettingError("device", ...) for a device no worker serves; the line the run shows while it waits for it when
    the operator allows that; None when a worker serves it."""
    from stark_web.studio.service.settings import SettingError

    available = served()
    if available.serves(device):
        return None
    if absent_allowed():
        return (f"{WAITING_PREFIX}{device}: none of this instance's gpu workers serves it yet "
                f"(available now: {available.text()})")
    raise SettingError("device", f"no worker of this instance serves {device}; available: {available.text()} "
                                 f"(from {available.source}). Choose one of those, or start a gpu worker on a host "
                                 "with that device")


def waiting_for_a_device(meta: dict) -> bool:
    """The run still shows the line it got because no live worker served its device when it was created."""
    return str(meta.get("status_line") or "").startswith(WAITING_PREFIX)


def wait_is_over(device: str, root_job_state: str | None) -> bool:
    """A worker now serves the device, or one has already taken the reference's evaluation."""
    return root_job_state == "started" or served().serves(device)
