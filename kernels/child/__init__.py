"""The harness's child side: code that runs only inside an isolated harness child, the process that imports the
uploaded problem and the candidate (untrusted code), never in the process that evaluates.

A child is a fresh interpreter (or a fork of the warm zygote, zygote_server) started by the parent
(kernels.parent.isolation.sandbox.run_worker) as `python -m kernels.child.worker TASK.json FD`. The worker runs one task kind:
reference (and inspect), candidate, retime, fuzz (fuzz_reference), ncu, call; with them: loading of problem and
candidate modules, the timing protocol, the integrity probes, the device lock as the child holds it (device_lock,
compile_aside), roofline ceilings, the profiler, and the authenticated channel back to the parent.

Nothing outside this package imports it (ruff's banned-api rule; tests/foundation/test_import_graph.py also for
the files ruff lets through), and it imports nothing of the layers above the harness or of Django (checked there
too).
"""
