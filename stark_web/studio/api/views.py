"""JSON API views (docs/api.md). Runs are visible to their owner and the users they are shared with;
anyone else gets 404, as if the run did not exist."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse

from stark_web.studio.api.auth import BadRequest, api_view, error, json_body
from stark_web.studio.api.bundle import build_bundle, standalone_kernel
from stark_web.studio.events import events_after
from stark_web.studio.models import Node, Run
from stark_web.studio.service import checks, control, devices, fairness
from stark_web.studio.service.checks import LimitError
from stark_web.studio.service.inputs import check_values, loads, plain_text, whole_number
from stark_web.studio.service.settings import SettingError, parse_run_settings


def visible_runs(user) -> Any:
    return Run.objects.filter(Q(owner=user) | Q(shared_with=user)).distinct().select_related("owner", "problem")


def find_run(request: HttpRequest, run_id: int) -> Run:
    run = visible_runs(request.user).filter(pk=run_id).first()
    if run is None:
        raise BadRequest("id", f"no run {run_id} that you can see", status=404)
    return run


def handles_errors(view):
    """Turn the errors a user can cause into 4xx JSON bodies that name the field."""

    def inner(request: HttpRequest, *args: Any, **kwargs: Any):
        try:
            return view(request, *args, **kwargs)
        except BadRequest as exc:
            return error(exc.status, exc.field, exc.message)
        except LimitError as exc:  # a per-user limit (429) or Redis down (503)
            return limit_error(exc)
        except SettingError as exc:
            return error(400, exc.field, exc.message)
        except control.RunStateError as exc:
            return error(409, "status", str(exc))
        except RequestDataTooBig:
            return error(413, "problem", f"the request is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")

    inner.__name__ = view.__name__
    inner.__doc__ = view.__doc__
    return inner


def limit_error(exc: LimitError) -> HttpResponse:
    """429/503 naming the limit; with `retry_after_s` (and a Retry-After header) when the limit says when."""
    retry = getattr(exc, "retry_after_s", None)
    response = error(exc.status, exc.field, exc.message, **({"retry_after_s": retry} if retry else {}))
    if retry:
        response["Retry-After"] = str(retry)
    return response


def request_data(request: HttpRequest) -> dict[str, Any]:
    """The request's fields (JSON object or form), with every value checked: nesting depth (a deeply nested
    body is a 400, not a RecursionError), finite numbers (no Infinity/NaN/1e400), no NUL characters."""
    if request.content_type == "application/json" and request.body:
        data = loads(request.body, "")
        if not isinstance(data, dict):
            raise BadRequest(None, "the JSON body must be an object")
        return data
    data = json_body(request)
    check_values(data)
    return data


def run_url(run: Run) -> str:
    return f"/runs/{run.pk}/"


@api_view("GET", "POST")
@handles_errors
def runs(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return create_run(request)
    try:
        limit = min(max(int(request.GET.get("limit", 50)), 1), 500)
        offset = max(int(request.GET.get("offset", 0)), 0)
    except ValueError:
        raise BadRequest("limit", "limit and offset must be whole numbers") from None
    qs = visible_runs(request.user)
    status = request.GET.get("status")
    if status:
        if status not in Run.Status.values:
            raise BadRequest("status", f"unknown status {status!r}; use one of {', '.join(Run.Status.values)}")
        qs = qs.filter(status=status)
    page = list(qs.order_by("-created_at", "-pk")[offset:offset + limit])
    return JsonResponse({"runs": [r.to_dict() for r in page], "count": qs.count(), "limit": limit,
                         "offset": offset})


def read_problem(request: HttpRequest, data: dict[str, Any]) -> tuple[str, str]:
    """(source, name) from the `problem` file or the `problem_source` field, size-limited and UTF-8."""
    limit = settings.STARK_MAX_UPLOAD_BYTES
    upload = request.FILES.get("problem")
    if upload is not None:
        if upload.size > limit:
            raise BadRequest("problem", f"the file is {upload.size} bytes; the limit is {limit} bytes "
                                        "(STARK_MAX_UPLOAD_BYTES)", status=413)
        raw, name = upload.read(), upload.name or "problem.py"
    elif data.get("problem_source"):
        text = data["problem_source"]
        if not isinstance(text, str):
            raise BadRequest("problem_source", "must be the problem's Python source as a string")
        raw, name = text.encode(), str(data.get("problem_name") or "problem.py")
        if len(raw) > limit:
            raise BadRequest("problem_source", f"the source is {len(raw)} bytes; the limit is {limit} bytes "
                                               "(STARK_MAX_UPLOAD_BYTES)", status=413)
    else:
        raise BadRequest("problem", "send a KernelBench-format .py file as `problem` (multipart) or its text "
                                    "as `problem_source`")
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("problem", "the file is not UTF-8 text; upload the Python source file") from None
    if "\x00" in source:
        raise BadRequest("problem", "the file contains NUL bytes; upload the Python source file")
    return source, plain_text(name.rsplit("/", 1)[-1].removesuffix(".py"), "problem_name")


def create_run(request: HttpRequest) -> HttpResponse:
    data = request_data(request)
    settings_ = parse_run_settings(data)  # cheap checks first, the problem's child process last
    waiting = devices.check_device(settings_.device) or ""  # a 400 naming the devices this instance serves
    with transaction.atomic():
        fairness.check_active_runs(request.user)  # the 429 before the slow check (create_run checks again)
    source, name = read_problem(request, data)
    checks.require_queues()  # a 503 naming Redis rather than a run nothing can start
    problem = control.problem_for(request.user, source, name, background=True)  # the full check: in the start job
    run = control.create_run(request.user, problem, settings_, waiting=waiting)
    return JsonResponse({"id": run.pk, "url": run_url(run), "api_url": f"/api/runs/{run.pk}"}, status=201)


@api_view("GET")
@handles_errors
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run, its nodes (the tree file's node schema) and the seq they reflect."""
    from stark_web.studio.events import snapshot

    run = find_run(request, run_id)
    snap = snapshot(run_id)
    return JsonResponse({"run": snap["run"], "nodes": snap["nodes"], "seq": snap["seq"], "meta": run.meta,
                         "problem_source": run.problem.source, "tree_url": f"/api/runs/{run_id}/tree.json"})


@api_view("GET")
@handles_errors
def run_tree(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's tree file (problem, settings, meta, nodes: what `python -m search run --out` writes), which
    `python -m search show` opens."""
    from stark_web.studio.service.runs import load_tree

    run = find_run(request, run_id)
    response = HttpResponse(load_tree(run).to_json(), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="stark_run{run.pk}_tree.json"'
    return response


@api_view("GET")
@handles_errors
def run_events(request: HttpRequest, run_id: int) -> HttpResponse:
    """Stored events after ?after=SEQ (default 0), oldest first, at most ?limit (default 1000)."""
    find_run(request, run_id)
    try:
        after = int(request.GET.get("after", 0))
        limit = min(max(int(request.GET.get("limit", 1000)), 1), 5000)
    except ValueError:
        raise BadRequest("after", "after and limit must be whole numbers") from None
    return JsonResponse({"events": events_after(run_id, after, limit)})


@api_view("POST")
@handles_errors
def run_action(request: HttpRequest, run_id: int, action: str) -> HttpResponse:
    run = find_run(request, run_id)
    if run.owner_id != request.user.pk:
        raise BadRequest("id", f"only the owner of run {run_id} can {action} it", status=403)
    data = request_data(request)
    if action == "cancel":
        control.cancel(run_id)
    elif action == "pause":
        control.pause(run_id)
    elif action == "resume":
        control.resume(run_id)
    elif action == "extend":
        raw = data.get("budget", data.get("more"))
        control.extend(run_id, whole_number(raw, "budget", "send the number of attempts to add as `budget`"))
    elif action == "share":
        username = data.get("username")
        if not username or not isinstance(username, str):
            raise BadRequest("username", "send the user to share the run with as `username`")
        control.share(run_id, username, remove=str(data.get("remove", "")).lower() in ("1", "true", "yes"))
    elif action == "fork":
        node_id = whole_number(data.get("node"), "node", "send the id of the node to fork from as `node`", low=0)
        overrides = {k: v for k, v in data.items() if k != "node"}
        new = control.fork(run, node_id, request.user, overrides)
        return JsonResponse({"id": new.pk, "url": run_url(new), "api_url": f"/api/runs/{new.pk}"}, status=201)
    else:
        raise BadRequest("action", f"unknown action {action!r}; use cancel, pause, resume, extend, share or fork",
                         status=404)
    run = Run.objects.select_related("owner", "problem").get(pk=run_id)
    shared = list(run.shared_with.order_by("username").values_list("username", flat=True))
    return JsonResponse({"run": run.to_dict(), "shared_with": shared})


def find_node(run: Run, node_id: int) -> Node:
    node = Node.objects.filter(run=run, node_id=node_id).first()
    if node is None:
        raise BadRequest("node_id", f"run {run.pk} has no node {node_id}", status=404)
    return node


@api_view("GET")
@handles_errors
def node_detail(request: HttpRequest, run_id: int, node_id: int) -> HttpResponse:
    run = find_run(request, run_id)
    return JsonResponse(find_node(run, node_id).api_dict())


@api_view("GET")
@handles_errors
def node_kernel(request: HttpRequest, run_id: int, node_id: int) -> HttpResponse:
    """The candidate as a standalone .py file (defines ModelNew, the problem's Model and its inputs)."""
    run = find_run(request, run_id)
    node = find_node(run, node_id)
    if not node.source.strip():
        raise BadRequest("node_id", f"node {node_id} has no candidate source yet (status {node.status})",
                         status=409)
    response = HttpResponse(standalone_kernel(run, node), content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run{run.pk}_node{node.node_id}_kernel.py"'
    return response


@api_view("GET")
@handles_errors
def run_bundle(request: HttpRequest, run_id: int) -> HttpResponse:
    """A zip: the winner, a script that checks and times it against the reference, the report, the environment.
    The winner is the best attempt, or the reference itself (with a note) when the run finished and no attempt beat
    it. ?node=ID bundles that node instead of the winner."""
    run = find_run(request, run_id)
    if request.GET.get("node"):
        try:
            node = find_node(run, int(request.GET["node"]))
        except ValueError:
            raise BadRequest("node", "node must be a node id") from None
    elif run.winner == "reference":
        node = find_node(run, 0)  # the reference itself (ModelNew = Model), with a note: no attempt beat it
    elif run.best_node is not None:
        node = find_node(run, run.best_node)
    else:
        raise BadRequest("run", f"run {run.pk} has no correct attempt yet, so there is no winner to bundle; "
                                "pass ?node=ID to bundle a given node", status=409)
    if not node.source.strip():
        raise BadRequest("node", f"node {node.node_id} has no candidate source ({node.verdict or node.status}), so "
                                 "there is no kernel to bundle", status=409)
    response = HttpResponse(build_bundle(run, node), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="stark_run{run.pk}_node{node.node_id}.zip"'
    return response
