"""The child's side of the harness channel: authenticated JSON lines back to the parent over an inherited pipe, and
where the child's own output goes (kernels.child.worker runs every task with these; the parent is kernels.parent.isolation.sandbox)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

_write = os.write


class Channel:
    """The authenticated line channel back to the parent."""

    def __init__(self, fd: int, nonce: str) -> None:
        self.fd = fd
        self.nonce = nonce
        self.current: str | None = None  # the last phase sent
        self._resume: str | None = None

    def on_wait(self, waiting: bool) -> None:
        """For kernels.child.device_lock.DeviceHold: a wait to take the device back is the phase "queue" (with its own
        deadline), then the phase it interrupted goes on."""
        if waiting:
            self._resume = self.current
            self.phase("queue")
        elif self._resume is not None:
            self.phase(self._resume)

    def send(self, message_type: str, /, **data: Any) -> None:
        line = json.dumps({"nonce": self.nonce, "type": message_type, **data}, default=str) + "\n"
        payload = line.encode()
        while payload:
            written = _write(self.fd, payload)
            payload = payload[written:]

    def phase(self, name: str) -> None:
        self.current = name
        self.send("phase", phase=name)


def redirect_output(path: Path) -> None:
    """Point fd 1 and 2 (C++ compilers, prints, tracebacks) at a log file for the current phase."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
