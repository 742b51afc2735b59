"""The harness's parent side: code that runs only in the process that evaluates (never in a harness child).

It plans an evaluation, starts and confines the children that run untrusted code (isolation/), caches what they
report and judges it: evaluate, reference, judge, fuzz, retime, ncu, compile_seed, cache, jobs, cli, report, with
their settings and results. It starts the child's code (kernels.child) by module name only, in the command lines
that start a child, and shares only kernels.shared with it.
"""
