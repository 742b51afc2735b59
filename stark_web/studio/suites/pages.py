"""The suites' pages: the list, the live suite page (grid, tables and figures drawn by static/js/suite.js from
GET /api/suites/<id>) and the new-suite form (the API's checks: an error names its field)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from search.llm.pricing import DEFAULT_COST_LIMIT_USD, DEFAULT_SUITE_COST_LIMIT_USD
from search.run_settings import DEVICE_KINDS
from search.teams import TEAMS
from stark_web.studio.api.auth import BadRequest
from stark_web.studio.api.views import request_data
from stark_web.studio.pages import device_choices
from stark_web.studio.pages.providers import any_ready
from stark_web.studio.service.checks import LimitError
from stark_web.studio.service.settings import SettingError
from stark_web.studio.suites import service, uploads
from stark_web.studio.suites.models import Suite


@login_required
def suites(request: HttpRequest) -> HttpResponse:
    rows = [service.suite_dict(s) | {"members": s.members.count()}
            for s in Suite.objects.filter(owner=request.user).select_related("owner").order_by("-created_at")[:200]]
    return render(request, "pages/suites.html", {"suites": rows})


@login_required
def suite_page(request: HttpRequest, suite_id: int) -> HttpResponse:
    suite = Suite.objects.filter(pk=suite_id, owner=request.user).first()
    if suite is None:
        raise Http404(f"no suite {suite_id} that you can see")
    config = {"suite": suite.pk, "api": f"/api/suites/{suite.pk}", "poll_ms": 2000}
    return render(request, "pages/suite.html", {"suite": suite, "config": config,
                                                "exports": ("results.json", "results.csv", "tables.csv", "report.md",
                                                            "trees.zip")})


def form_data(request: HttpRequest) -> dict:
    data = request_data(request)
    data = {k: v for k, v in data.items() if v not in ("", None)}
    if not (data.get("teams_json") or "").strip():
        data["teams"] = ",".join(request.POST.getlist("teams"))
    else:
        data["teams"] = data["teams_json"]
    data.pop("teams_json", None)
    return data


@login_required
def new_suite(request: HttpRequest) -> HttpResponse:
    from stark_web.studio.suites.api import create_from

    ready = any_ready()  # an LLM team with no key on this server says so, as on the new-run page
    context = {"teams": [(name, entry.about, entry.llm and not ready) for name, entry in TEAMS.items()
                         if entry.offered],
               "sets": uploads.bundled_sets(), "values": {"budget": 10, "device": "cpu"}, "error": None,
               "llm_ready": ready, "default_cost_limit": f"{DEFAULT_COST_LIMIT_USD:g}",
               "default_suite_cost_limit": f"{DEFAULT_SUITE_COST_LIMIT_USD:g}"}
    context["devices"] = device_choices.options(list(DEVICE_KINDS), "cpu")
    if request.method == "POST":
        values = form_data(request)
        try:
            suite = create_from(request, values)
            return redirect(f"/suites/{suite.pk}/")
        except (SettingError, LimitError, BadRequest) as exc:
            context["error"] = {"field": exc.field, "message": exc.message}
            context["values"] = values
            context["devices"] = device_choices.options(list(DEVICE_KINDS), str(values.get("device") or "cpu"))
            context["chosen"] = request.POST.getlist("teams")
            return render(request, "pages/suite_new.html", context, status=getattr(exc, "status", 400))
    context["chosen"] = ["rules"]
    return render(request, "pages/suite_new.html", context)
