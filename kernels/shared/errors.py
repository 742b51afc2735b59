"""Errors a user can cause with a bad problem file; the message names the problem and the fix."""

from __future__ import annotations


class ProblemError(ValueError):
    """The problem (reference model) is invalid: it does not parse, lacks a piece, hangs, raises or is too big."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log = log


class DeviceBusyError(ProblemError):
    """The problem's reference could not run because OTHER processes filled the GPU's memory (kernels.shared.device_busy):
    not the problem's fault; a ProblemError subclass so that every caller still stops the evaluation."""
