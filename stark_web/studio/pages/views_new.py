"""The new-run page: pick a problem (upload, paste or gallery), see it validated at once, start the run."""

from __future__ import annotations

import os
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from stark_web.studio.pages import device_choices, gallery
from stark_web.studio.pages.forms import TEAM_HELP, NewRunForm
from stark_web.studio.pages.providers import LLM_TEAMS, any_ready, providers
from stark_web.studio.service import background_check, checks, control, devices, fairness
from stark_web.studio.service.checks import LimitError
from stark_web.studio.service.settings import RunSettings, SettingError, parse_run_settings

BINARY = ("is a binary file, not Python source text; upload the problem's .py file (a KernelBench-format module "
          "with Model, get_inputs and get_init_inputs)")


def problem_from(request: HttpRequest) -> tuple[str, str]:
    """(source, name) from the uploaded file, else the pasted text; raises SettingError("problem", ...)."""
    limit = settings.STARK_MAX_UPLOAD_BYTES
    upload = request.FILES.get("problem")
    if upload is not None and upload.size:
        name = (upload.name or "problem.py").rsplit("/", 1)[-1]
        if upload.size > limit:
            raise SettingError("problem", f"{name} is {upload.size / 1024:.0f} KB; problems are limited to "
                                          f"{limit / 1024:.0f} KB (STARK_MAX_UPLOAD_BYTES): upload the .py source only")
        raw = upload.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SettingError("problem", f"{name} {BINARY}") from None
        if "\x00" in text:
            raise SettingError("problem", f"{name} {BINARY}")
        return text, name.removesuffix(".py")
    source = request.POST.get("problem_source", "")
    if len(source.encode()) > limit:
        raise SettingError("problem", f"the source is {len(source.encode()) / 1024:.0f} KB; problems are limited "
                                      f"to {limit / 1024:.0f} KB (STARK_MAX_UPLOAD_BYTES)")
    if "\x00" in source:
        raise SettingError("problem", f"the pasted text contains NUL bytes: it {BINARY}")
    name = (request.POST.get("problem_name") or "pasted").removesuffix(".py")
    if not source.strip():
        raise SettingError("problem", "no problem given: upload a KernelBench-format .py file, paste its source, "
                                      "or pick an example")
    return source, name


def page_context(form: NewRunForm, **extra: Any) -> dict[str, Any]:
    served = devices.served()  # the device choices tell the truth: which ones a live worker serves
    if form.is_bound:
        device_choices.apply(form.fields["device"], served, {"device": form.data.get("device")})
    else:
        device_choices.apply(form.fields["device"], served, form.initial)
    return {"form": form, "gallery": gallery.by_level(), "providers": providers(), "llm_ready": any_ready(),
            "llm_teams": LLM_TEAMS, "team_help": TEAM_HELP, "max_upload_bytes": settings.STARK_MAX_UPLOAD_BYTES,
            "check_timeout_s": f"{checks.deadline_s(float(settings.STARK_CHECK_TIMEOUT_S)):g}", "served": served, **extra}


@login_required
async def new_run(request: HttpRequest) -> HttpResponse:
    """Async, so that the problem check is cancelled (its harness child killed) when the browser goes away."""
    if request.method != "POST":
        return await sync_to_async(blank_page)(request)
    form = NewRunForm(request.POST, request.FILES)
    status = 400
    problem_error = ""
    if form.is_valid():
        try:
            run_settings = parse_run_settings(form.run_data())
            waiting = await sync_to_async(devices.check_device)(run_settings.device) or ""
            user = await request.auser()
            await sync_to_async(active_runs_allowed)(user)  # the 429 before anything slow
            source, name = problem_from(request)
            summary = await sync_to_async(checked_before)(user, source)
            if summary is None:  # the check panel has not answered for this text yet: check it now
                summary = await checked_now(source, user.pk)
            run = await sync_to_async(start_run)(user, source, name, run_settings, summary, waiting)
        except SettingError as exc:
            status = getattr(exc, "status", 400)
            field = {"problem": "problem_source", "team_options": None, "eval": None}.get(exc.field, exc.field)
            form.add_error(field if field in form.fields else None, exc.message)
            if exc.field == "problem":
                problem_error = exc.message
        else:
            return redirect("pages:run", run_id=run.pk)
    # The form keeps what the user gave: the text (an uploaded file's text is in the editor too), the file's
    # name, and the check panel shows why the problem was refused.
    upload = request.FILES.get("problem")
    kept = (upload.name if upload is not None else "") or request.POST.get("problem_name", "")
    return await sync_to_async(render)(request, "pages/new_run.html",
                                       page_context(form, problem_error=problem_error, kept_file=kept), status=status)


def blank_page(request: HttpRequest) -> HttpResponse:
    form = NewRunForm()
    chosen = gallery.example_source(request.GET.get("example", "")) if request.GET.get("example") else None
    if chosen:
        form.initial.update(problem_source=chosen[1], problem_name=chosen[0]["path"].rsplit("/", 1)[-1])
    return render(request, "pages/new_run.html", page_context(form))


def active_runs_allowed(user) -> None:
    with transaction.atomic():
        fairness.check_active_runs(user)  # LimitError (429); create_run checks again


def checked_before(user, source: str) -> dict[str, Any] | None:
    """The summary of this text's earlier check (a stored problem, or the check panel's verdict): "Start run" does
    not check it again. SettingError("problem", ...) when that check refused it."""
    known = control.known_problem(user, source)
    if known is not None:
        refused = background_check.refusal(known.summary)
        if refused:
            raise SettingError("problem", refused)
        return known.summary
    verdict = background_check.remembered(user.pk, source)
    if verdict is not None and verdict.get("error"):
        raise SettingError("problem", verdict["error"])
    return verdict.get("summary") if verdict is not None else None


async def checked_now(source: str, user_id: int) -> dict[str, Any]:
    """The full check, its verdict remembered (a LimitError is not a verdict)."""
    try:
        summary = await checks.run_check(source, user_id)
    except (LimitError, checks.CheckTimedOut):
        raise  # no verdict on the file (no slot, or the check overran): checked again next time
    except SettingError as exc:
        await sync_to_async(background_check.remember)(user_id, source, error=exc.message)
        raise
    await sync_to_async(background_check.remember)(user_id, source, summary=summary)
    return summary


def start_run(user, source: str, name: str, run_settings: RunSettings, summary: dict[str, Any] | None,
              waiting: str = ""):
    problem = control.problem_for(user, source, name, summary=summary)
    return control.create_run(user, problem, run_settings, waiting=waiting)


@login_required
@require_POST
async def validate(request: HttpRequest) -> HttpResponse:
    """htmx partial: the problem's summary (shapes, dtypes, FLOPs, bytes, memory) and warnings, or its error.
    Each keystroke pause sends one; htmx queues the last one behind a check in flight (each check ends within its
    deadline), and a browser that goes away cancels its check here (the harness child is killed)."""
    try:
        source, _ = problem_from(request)
    except SettingError as exc:
        return await sync_to_async(render)(request, "pages/_validation.html", {"empty": True, "error": exc.message})
    user = await request.auser()
    try:
        summary = await checked_now(source, user.pk)
    except LimitError as exc:
        return await sync_to_async(render)(request, "pages/_validation.html", {"busy": True, "error": exc.message})
    except SettingError as exc:
        return await sync_to_async(render)(request, "pages/_validation.html", {"error": exc.message})
    device = request.POST.get("device", "cpu")
    human = {"parameters": si(summary.get("parameters")), "flops": si(summary.get("flops")),
             "bytes": si(summary.get("bytes"), "B")}
    return await sync_to_async(render)(request, "pages/_validation.html",
                                       {"summary": summary, "human": human, "warnings": warnings(summary, device)})


def si(value: Any, unit: str = "") -> str:
    """1234567 -> '1.23 M' (+unit), for numbers people read."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "—"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor:
            return f"{v / factor:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}".rstrip()


def host_memory_gb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def warnings(summary: dict[str, Any], device: str) -> list[str]:
    """What the user should know before queueing: memory, CPU-only host, slow forward passes, nothing to fuse."""
    out: list[str] = []
    memory_gb = (summary.get("memory_mb") or 0) / 1024
    host = host_memory_gb()
    from stark_web.studio.pages.forms import host_has_gpu

    if memory_gb >= 1 and not host_has_gpu():
        out.append(f"inputs and outputs need {memory_gb:.1f} GB; this host is CPU-only, so CUDA runs need a GPU worker")
    if host and memory_gb > 0.5 * host:
        out.append(f"the problem needs {memory_gb:.1f} GB, more than half of this host's {host:.0f} GB of memory")
    available = devices.served()
    if not available.serves(device):
        out.append(f"no worker of this instance serves {device} (available: {available.text()}): "
                   + ("a run would wait until one does" if devices.absent_allowed() else
                      "a run for it is refused; choose one of those"))
    forward_ms = summary.get("forward_ms") or 0
    if forward_ms > 500:
        out.append(f"one forward pass takes {forward_ms / 1000:.1f} s here; each evaluation times it 100+ times")
    ops = summary.get("ops") or []
    if len(ops) == 1:
        out.append(f"a single op ({ops[0]}): a library kernel is hard to beat — fusion wins need several ops")
    return out


@login_required
@require_GET
def example(request: HttpRequest) -> HttpResponse:
    """htmx partial: the problem field filled with a gallery example (which then validates itself)."""
    found = gallery.example_source(request.GET.get("path", ""))
    if found is None:
        raise Http404("no such example; pick one from the gallery")
    entry, source = found
    form = NewRunForm(initial={"problem_source": source, "problem_name": entry["path"].rsplit("/", 1)[-1]})
    return render(request, "pages/_problem_field.html", {"form": form, "example": entry, "autovalidate": True})
