"""A node's figures formatted for people (the inspector, compare and the runs list read the same words), its profile
(kernels/shared/profile.py: torch.profiler, plus Nsight Compute metrics when asked) included."""

from __future__ import annotations

import re
from typing import Any

from search.llm.temperature import dropped
from stark_web.studio.models import Node
from stark_web.studio.pages import speed as speeds


def ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.1f} µs" if value < 0.1 else f"{value:.3f} ms"


def times(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def usd(value: float | None) -> str:
    return "$0" if not value else (f"${value:.4f}" if value < 1 else f"${value:.2f}")


def sci(value: float | None) -> str:
    return "—" if value is None else f"{value:.2e}"


def baseline(baselines: dict[str, Any], settings: dict[str, Any], key: str, kind: str) -> str:
    if baselines.get(key) is not None:
        return ms(baselines[key])
    asked = kind in (settings.get("baselines") or [])
    return "not measured (failed or skipped)" if asked else f"not measured (the {kind} baseline was not asked for)"


def roofline_view(result: dict[str, Any]) -> dict[str, Any]:
    """The roofline in words (static/js/roofline.js says the same): bound, margin, and over 100% a warning."""
    roofline = result.get("roofline") or {}
    pct = roofline.get("pct_of_peak")
    if pct is None:
        return {"text": "—", "pct": None, "width": 0, "over": False, "explain": ""}
    settings = result.get("settings") or {}
    margin = settings.get("roofline_margin")
    if margin is None:
        margin = 1.25 if str(settings.get("device", "cpu")).startswith("cuda") else 3.0
    bound = roofline.get("bound", "?")
    achieved = (f"{roofline.get('achieved_gbps', 0):.1f} GB/s achieved" if bound == "memory"
                else f"{roofline.get('achieved_tflops', 0):.3f} TFLOP/s achieved")
    explain = f"{pct:.0f}% of the {bound}-bound ceiling measured on this device ({achieved})."
    if not roofline.get("flops"):
        explain += " FLOPs are not counted for these ops, so only the memory bound applies."
    if roofline.get("ceilings_implausible"):
        explain += " The ceilings were measured under load: nothing is flagged."
    over = pct > 100
    if over and roofline.get("less_work"):
        explain += (f" Above 100% of the reference's own work, at {roofline.get('pct_of_floor', 0):.0f}% of the floor "
                    "(its inputs read and outputs written once): it computes or moves less than the reference's ops "
                    "(a rewrite); the harness flags beyond_roofline only past the floor.")
        text = f"{pct:.0f}% — less work than the reference"
    elif over:
        explain += (f" Above 100%: faster than the measured ceiling. The harness flags beyond_roofline only past "
                    f"{margin:g}× the ceiling (measured ceilings are rough); check the time before trusting it.")
        text = f"{pct:.0f}% — exceeds the measured ceiling, check"
    else:
        text = f"{pct:.0f}% of peak ({bound}-bound)"
    return {"text": text, "pct": pct, "width": min(100.0, max(0.0, float(pct))), "over": over, "explain": explain}


TAGS = re.compile(r"\s*\[rules:[^\]]*\]\s*|\s*\(part \d+/\d+[^)]*\)")


def move_label(node: Any) -> str:
    """A short name for the move that made a node (static/js/speed.js moveLabel says the same)."""
    if node.parent is None:
        return "reference"
    first = (node.instructions or [None])[0] or node.instruction or ""
    text = re.split(r"[.;:\n]", TAGS.sub(" ", first).strip())[0].strip()
    text = re.sub(r"^Same move \(", "", text).rstrip(")")
    words = " ".join(text.split()[:4])
    label = words if len(words) <= 16 else words[:15] + "…"
    if label and len(node.instructions or []) > 1:
        label += f" ×{len(node.instructions)}"
    if node.role == "debug":
        return f"debug: {label}" if label else "debug"
    return label


def node_view(node: Node) -> dict[str, Any]:
    result = node.result or {}
    correctness = result.get("correctness") or {}
    timing = result.get("timing") or {}
    baselines = result.get("baselines") or {}
    roofline = result.get("roofline") or {}
    usage = node.usage or {}
    roof = roofline_view(result)
    speed = speeds.speed(node)
    settings = result.get("settings") or {}
    logs = result.get("logs") or {}
    trials = correctness.get("trials")
    return {
        "verdict": node.verdict or "—",
        "status": node.status,
        "role": node.role,
        "attempt": str(node.attempt),
        "runtime": runtime_text(node, speed),
        "speed": speed,
        "speedup": speeds.text(speed),
        "speed_unstable": bool(speed and speed["unstable"]),
        "slower": bool(speed and not speed["reference"] and speed["value"] <= 1.0),
        "speed_class": speeds.class_words(speed),
        "not_retimed": bool(speed and speed.get("not_retimed")),
        "reused": bool(speed and speed.get("reused")),
        "marks": speeds.marks(speed),
        "move": move_label(node),
        "roofline": roof["text"],
        "roof": roof,
        "retime": retime_view(result.get("retime")),
        "max_abs_error": sci(correctness.get("max_abs_error")),
        "max_rel_error": sci(correctness.get("max_rel_error")),
        "trials": "—" if trials is None else f"{correctness.get('passed', 0)}/{trials} passed",
        "tokens": f"{usage.get('input_tokens', 0):,} / {usage.get('output_tokens', 0):,}",
        "cost": usd(usage.get("cost_usd")),
        "calls": [call_view(c) for c in usage.get("calls") or []],
        "temperature_dropped": any(dropped(c) for c in usage.get("calls") or []),
        "flags": ", ".join(result.get("flags") or []) or "—",
        "flag_list": result.get("flags") or [],
        "reasons": node.reasons or result.get("reasons") or [],
        "correctness": correctness,
        "integrity": result.get("integrity") or [],
        "timing": {"median": ms(timing.get("median_ms")), "iqr": ms(timing.get("iqr_ms")), "min": ms(timing.get("min_ms")),
                   "mean": ms(timing.get("mean_ms")), "runs": timing.get("runs"), "warmup": timing.get("warmup")}
        if timing else None,
        "baselines": {"eager": baseline(baselines, settings, "eager_ms", "eager"),
                      "compile": baseline(baselines, settings, "compile_ms", "compile"),
                      "max_autotune": baseline(baselines, settings, "compile_max_autotune_ms", "compile-max-autotune")}
        if baselines else None,
        "roofline_detail": roofline,
        "profile": profile_view(result),
        "fuzz": fuzz_view(result),
        "build_log": logs.get("build", "") or build_log_note(node, result),
        "run_log": logs.get("run", ""),
        "environment": result.get("environment") or {},
        "instructions": node.instructions or ([node.instruction] if node.instruction else []),
        "wall_s": result.get("wall_s"),
    }


def runtime_text(node: Node, speed: dict[str, Any] | None) -> str:
    """The runtime in the protocol that gave the node's figure: side by side with the reference when it was re-timed
    (the search's own time beside it), else the search's."""
    if speed and speed.get("provenance") == "retimed" and speed.get("runtime_ms") is not None:
        return f"{ms(speed['runtime_ms'])} side by side with the reference (the search timed {ms(node.runtime_ms)})"
    return ms(node.runtime_ms)


def temperature_text(value: Any) -> str:
    return "none" if value is None else f"{value:g}"


def call_view(call: dict[str, Any]) -> dict[str, Any]:
    """One provider call for the agent tab: the temperature asked for and the one sent, and why they differ."""
    asked, sent = call.get("temperature_requested"), call.get("temperature")
    note = call.get("temperature_note") or ""
    if dropped(call) and not note:  # a record from before the notes: say what is known
        note = next((n for n in call.get("notes") or [] if "temperature" in n), "not sent")
    return {**call, "asked": temperature_text(asked), "sent": "not sent" if asked is not None and sent is None
            else temperature_text(sent), "dropped": dropped(call), "note": note}


def build_log_note(node: Node, result: dict[str, Any]) -> str:
    """Why a build log is empty, in words (a C++ extension may compile without printing anything)."""
    if not result:
        return "(not built yet)"
    compiled = "load_inline" in (node.source or "") or "cpp_extension" in (node.source or "")
    if compiled and result.get("verdict") not in ("build_error", None):
        return ("(the compiler printed nothing: the C++ extension built quietly — torch prints compiler output only "
                "for warnings and errors)")
    return "(the build printed nothing)"


def retime_view(retime: dict[str, Any] | None) -> dict[str, Any] | None:
    if not retime:
        return None
    out = dict(retime)
    if retime.get("state") == "done":
        out["reference_text"] = ms((retime.get("reference") or {}).get("median_ms"))
        out["candidate_text"] = ms((retime.get("candidate") or {}).get("median_ms"))
    return out


NCU_COLUMNS = (("dram_pct", "DRAM throughput"), ("sm_pct", "SM throughput"), ("occupancy_pct", "Achieved occupancy"))


def rate(kernel: dict[str, Any]) -> str:
    if kernel.get("tflops") is None:
        return "—"
    text = f"{kernel['tflops']:.3g} TFLOP/s"
    if kernel.get("pct_of_peak") is not None:
        text += f" ({kernel['pct_of_peak']:.0f}% of the matmul ceiling)"
    return text


def profile_view(result: dict[str, Any]) -> dict[str, Any] | None:
    """None when the result has no profile (not timed, profiling off, or recorded before profiles existed)."""
    profile = result.get("profile")
    if not isinstance(profile, dict):
        return None
    kernels = [k for k in profile.get("kernels") or [] if isinstance(k, dict)]
    cuda = profile.get("activity") == "cuda"
    summary = ""
    if kernels:
        summary = (f"{'CUDA kernels by device time' if cuda else 'CPU ops by self time'}: {ms(profile.get('forward_ms'))} "
                   f"per forward, averaged over {profile.get('calls')} profiled call(s) after timing")
        if profile.get("achieved_gbps") is not None:
            summary += f"; the whole forward moves its minimum bytes at {profile['achieved_gbps']:.3g} GB/s"
            if profile.get("pct_of_copy") is not None:
                summary += f" ({profile['pct_of_copy']:.0f}% of the measured copy ceiling)"
        if profile.get("wall_s") is not None:
            summary += f" · profiling took {profile['wall_s']:.2f} s"
    rows = [{"name": str(k.get("name")), "short": str(k.get("name"))[:72], "share": f"{100 * (k.get('share') or 0):.0f}%",
             "width": min(100.0, max(0.0, 100 * float(k.get("share") or 0))), "ms": ms(k.get("ms")),
             "calls": f"{k.get('calls') or 0:g}", "rate": rate(k)} for k in kernels]
    ncu = profile.get("ncu") if isinstance(profile.get("ncu"), dict) else None
    ncu_view = None
    if ncu is not None:
        ncu_view = {"note": ncu.get("note") or "",
                    "rows": [{"name": str(k.get("name")), "short": str(k.get("name"))[:72],
                              "duration": ms((k.get("duration_us") or 0) / 1000) if k.get("duration_us") is not None
                              else "—",
                              "figures": [f"{k[key]:.0f}%" if k.get(key) is not None else "—" for key, _ in NCU_COLUMNS]}
                             for k in ncu.get("kernels") or [] if isinstance(k, dict)],
                    "columns": [label for _, label in NCU_COLUMNS]}
    why = profile.get("error") or profile.get("note") or ("no kernels recorded" if not kernels else "")
    return {"rows": rows, "summary": summary, "why": why, "note": profile.get("note") or "", "ncu": ncu_view}


def fuzz_view(result: dict[str, Any]) -> dict[str, Any] | None:
    """The fuzzing stage's verdict (kernels/parent/fuzz.py) in words; None for results without one."""
    fuzz = result.get("fuzz")
    if not isinstance(fuzz, dict):
        return None
    failed = [f for f in fuzz.get("failed") or [] if isinstance(f, dict)]
    summary = (f"{fuzz.get('level')} level, seed {fuzz.get('seed')}: {fuzz.get('passed', 0)} of {fuzz.get('run', 0)} "
               f"variant(s) correct, {len(failed)} failed, {len(fuzz.get('skipped') or [])} skipped"
               f" · {fuzz.get('cost_s', 0):.2f} s")
    if fuzz.get("note"):
        summary += f" ({fuzz['note']})"
    return {"summary": summary, "failed": failed}
