"""POST /api/runs/<id>/steer {"action", "node"?, "text"?, "anchored_source"?, "instructions"?}: a human action on
a running search (stark_web/studio/service/steering.py). Only the owner and staff steer: anyone who cannot see
the run gets 404, a user it is shared with 403; a bad action is a 400 naming the field; an ended run 409."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from stark_web.studio.api.auth import BadRequest, api_view
from stark_web.studio.api.views import handles_errors, request_data, visible_runs
from stark_web.studio.models import Node, Run
from stark_web.studio.service import steering


def steerable_run(request: HttpRequest, run_id: int) -> Run:
    run = Run.objects.filter(pk=run_id).first() if run_id < 2**63 else None
    if run is None or not (visible_runs(request.user).filter(pk=run_id).exists() or request.user.is_staff):
        raise BadRequest("id", f"no run {run_id} that you can see", status=404)
    if not steering.can_steer(request.user, run):
        raise BadRequest("id", f"only the owner of run {run_id} can steer it", status=403)
    return run


@api_view("POST")
@handles_errors
def run_steer(request: HttpRequest, run_id: int) -> HttpResponse:
    run = steerable_run(request, run_id)
    data = request_data(request)
    record = steering.steer(run.pk, request.user, data)
    node_id = record.get("node_id", steering.parse(data)["node"])
    row = None if node_id is None else Node.objects.filter(run=run, node_id=node_id).first()
    return JsonResponse({"human": record, "node": None if row is None else row.api_dict()})
