"""Child side of the rules team: trace the problem and render candidates, inside a harness child only.

`analyse_and_render` is the function the rules team registers as an isolated call (search.teams.rules.remote,
kernels.parent.isolation.isolated_call), run in an isolated child (task kind "call"):
importing the problem runs its module-level code, so it never runs in a web, search or worker process. It returns
JSON only: the Facts the roles choose moves from, and the rendered source of every recipe asked for (the ones named,
every candidate move from `moves_from`, every fix from `fixes_for`).

Request: {problem_source, cuda: bool, problem_name, recipes: [recipe text], moves_from: {recipe, device, target}
          | null, fixes_for: {recipe, verdict, log_text, parent: recipe text | null} | null}
Answer:  {facts: Facts.to_dict(), sources: {recipe text: source}, render_errors: {recipe text: "Type: message"}}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from search.teams.rules.analysis.facts import facts_of
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.remote import LOADED, Request, expand
from search.teams.rules.rendering.candidate import render
from search.teams.rules.rewrites.passes import variants


def dtypes(cuda: bool) -> tuple[torch.dtype, ...]:
    """The dtypes fused kernels are written for: half precision too on CUDA."""
    return (torch.float32, torch.float16, torch.bfloat16) if cuda else (torch.float32,)


def analyse_and_render(request: dict[str, Any], report: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Trace the problem (see module doc) and render the recipes asked for; report(LOADED) once it is imported."""
    source = str(request["problem_source"])
    analysis = analyse(source, dtypes(bool(request.get("cuda"))), (lambda: report(LOADED)) if report else None)
    found, by_rewrites = variants(analysis)
    facts = facts_of(analysis, found, by_rewrites)
    sources: dict[str, str] = {}
    errors: dict[str, str] = {}
    for recipe in expand(Request.from_payload(request), facts):
        key = recipe.to_text()
        if key in sources or key in errors:
            continue
        try:
            sources[key] = render(source, recipe, analysis, str(request.get("problem_name") or "the problem"),
                                  by_rewrites).source
        except Exception as exc:  # noqa: BLE001 - reported per recipe; the server raises it when that one is used
            errors[key] = f"{type(exc).__name__}: {exc}"
    return {"facts": facts.to_dict(), "sources": sources, "render_errors": errors}
