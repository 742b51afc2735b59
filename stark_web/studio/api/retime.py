"""POST /api/runs/<id>/retime {"node": N}: re-time node N (default: the run's best) side by side with the
reference (stark_web/studio/service/retime.py). 202 with the queued state; 409 when there is nothing to re-time."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from stark_web.studio.api.auth import BadRequest, api_view
from stark_web.studio.api.views import find_run, handles_errors, request_data
from stark_web.studio.service import flood, retime
from stark_web.studio.service.inputs import whole_number


@api_view("POST")
@handles_errors
def run_retime(request: HttpRequest, run_id: int) -> HttpResponse:
    run = find_run(request, run_id)
    if run.owner_id != request.user.pk:
        raise BadRequest("id", f"only the owner of run {run_id} can re-time its nodes", status=403)
    raw = request_data(request).get("node")
    node_id = None if raw in (None, "") else whole_number(raw, "node", "send the id of the node to re-time as `node`",
                                                                  low=0)
    flood.check_retimes(request.user)  # 429 beyond STARK_MAX_QUEUED_RETIMES, before anything is queued
    try:
        row = retime.request(run, node_id)
    except retime.RetimeRefused as exc:
        raise BadRequest(exc.field, exc.message, status=exc.status) from None
    return JsonResponse({"node": row.node_id, "retime": (row.result or {}).get("retime")}, status=202)
