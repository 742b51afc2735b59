"""The suites' JSON API (docs/api.md, Suites): create, list, read (cells and per-team metrics), act on as a whole,
export (results JSON/CSV, tables CSV, Markdown report, trees zip) and import a `python -m search bench` output.
A suite is its owner's: anyone else gets 404."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from stark_web.studio.api.auth import BadRequest, api_view
from stark_web.studio.api.views import handles_errors, request_data
from stark_web.studio.service.inputs import plain_text, whole_number
from stark_web.studio.suites import export, service, spend, uploads
from stark_web.studio.suites.models import Suite


def find_suite(request: HttpRequest, suite_id: int) -> Suite:
    suite = Suite.objects.select_related("owner").filter(pk=suite_id, owner=request.user).first()
    if suite is None:
        raise BadRequest("id", f"no suite {suite_id} that you can see", status=404)
    return suite


def created(suite: Suite) -> JsonResponse:
    return JsonResponse({"id": suite.pk, "url": f"/suites/{suite.pk}/", "api_url": f"/api/suites/{suite.pk}"},
                        status=201)


def create_from(request: HttpRequest, data: dict | None = None) -> Suite:
    """POST /api/suites and the new-suite form: the same checks, the same answer."""
    data = request_data(request) if data is None else data
    teams = uploads.read_teams(data.get("teams") or data.get("team"))
    budget = whole_number(data.get("budget", 30), "budget", "send the attempts per run as `budget`", 1, 1000)
    max_active = data.get("max_active")
    max_active = None if max_active in (None, "") else whole_number(max_active, "max_active",
                                                                    "send how many runs may be active at once", 1, 64)
    fields = uploads.run_fields(data)
    problems = uploads.read_problems(request.FILES, data)
    name = plain_text(data.get("name"), "name")
    limit = spend.read_limit(data.get(spend.FIELD), teams)
    return service.create_suite(request.user, name, problems, teams, budget, fields, max_active, limit)


@api_view("GET", "POST")
@handles_errors
def suites(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return created(create_from(request))
    rows = Suite.objects.filter(owner=request.user).select_related("owner").order_by("-created_at", "-pk")[:200]
    return JsonResponse({"suites": [service.suite_dict(s) for s in rows]})


@api_view("GET")
@handles_errors
def suite_detail(request: HttpRequest, suite_id: int) -> HttpResponse:
    return JsonResponse(service.results(find_suite(request, suite_id)))


@api_view("GET", "POST")
@handles_errors
def suite_export_or_action(request: HttpRequest, suite_id: int, fmt: str) -> HttpResponse:
    """GET /api/suites/<id>/<export> (results.json, ...), POST /api/suites/<id>/<action> (pause, ...)."""
    if request.method == "GET":
        return suite_export(request, suite_id, fmt)
    return suite_action(request, suite_id, fmt)


def suite_action(request: HttpRequest, suite_id: int, action: str) -> HttpResponse:
    find_suite(request, suite_id)
    data = request_data(request)
    if action == "pause":
        service.pause(suite_id)
    elif action == "resume":
        service.resume(suite_id)
    elif action == "cancel":
        service.cancel(suite_id)
    elif action == "extend":
        service.extend(suite_id, whole_number(data.get("budget", data.get("more")), "budget",
                                              "send the number of attempts to add as `budget`"))
    else:
        raise BadRequest("action", f"unknown action {action!r}; use pause, resume, extend or cancel", status=404)
    return JsonResponse({"suite": service.suite_dict(Suite.objects.select_related("owner").get(pk=suite_id))})


def suite_export(request: HttpRequest, suite_id: int, fmt: str) -> HttpResponse:
    suite = find_suite(request, suite_id)
    if fmt not in export.FORMATS:
        raise BadRequest("format", f"unknown export {fmt!r}; use {', '.join(export.FORMATS)}", status=404)
    body, content_type = export.render(suite, fmt)
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="suite{suite.pk}_{fmt}"'
    return response


@api_view("POST")
@handles_errors
def suite_import(request: HttpRequest) -> HttpResponse:
    """`results`: one or more bench results files (or a suite's results.json); `trees`: optional zip of tree files."""
    files = request.FILES.getlist("results")
    if not files:
        raise BadRequest("results", "send `python -m search bench` results files as `results` (multipart)")
    trees = request.FILES.get("trees")
    name = plain_text(request.POST.get("name"), "name")
    suite = export.import_bench(request.user, [(f.name or "results.json", f.read()) for f in files],
                                None if trees is None else trees.read(), name)
    return created(suite)
