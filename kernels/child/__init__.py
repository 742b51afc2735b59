"""The harness's child side: code that runs only inside an isolated harness child, the process that imports the
uploaded problem and the candidate (untrusted code), never in the process that evaluates.

A child is a fresh interpreter (or a fork of the warm zygote, zygote_server) started by the parent
(kernels.parent.isolation.sandbox.run_worker) as `python -m kernels.child.worker TASK.json FD`. The worker runs one
task kind: reference and inspect (reference_work), candidate, retime (retime_rounds), fuzz_reference
(fuzz_variants), ncu (ncu_range), call; with them: loading of problem and candidate modules, the timing protocol,
the integrity probes, the device lock as the child holds it (device_lock, compile_aside), roofline ceilings, the
profiler, and the authenticated channel back to the parent.

Of the harness it imports only kernels.shared, and nothing of search/, stark_web or Django; nothing outside this
package imports it (import-linter's "harness: ..." contracts in pyproject.toml).
"""
