"""Suites: a KernelBench level as one job, one run per (problem, team), the paper's tables live.

models: Suite and SuiteMember; service: create, advance (start members as the owner's active-run slots free),
pause/resume/extend/cancel, results (search.bench_record per run, search.engine.suite_metrics per team); uploads: problems
from files, a zip of level folders or a bundled set; api, pages, export (CSV/JSON/Markdown/trees, bench import);
jobs: the advance step on the search queue and its periodic chain.
"""
