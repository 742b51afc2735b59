"""Device choices from the live workers, the same on every page that starts work (new run, suite, fork, extend):
a device no worker serves is shown but cannot be chosen, with why (unless the operator lets runs wait for absent
devices: it is then chosen knowingly, its label says the run waits)."""

from __future__ import annotations

from typing import Any

from django import forms

from stark_web.studio.service import devices


def why_not(device: str, served: devices.Served) -> str:
    """Why `device` cannot be chosen now ("" when a live worker serves it)."""
    if served.serves(device):
        return ""
    return (f"no worker of this instance serves {device} (available: {served.text()}, from {served.source}); "
            "start a gpu worker on a host with that device")


def options(kinds: list[str], chosen: str, served: devices.Served | None = None) -> list[dict[str, Any]]:
    """[{value, label, disabled, why, selected}] for a <select>: each device kind, unserved ones disabled with
    why; the chosen one falls back to the first served kind when it is not served."""
    served = served or devices.served()
    waits = devices.absent_allowed()
    out = []
    for kind in kinds:
        why = why_not(kind, served)
        label = kind if not why else f"{kind} — no worker serves it" + (" (a run waits for one)" if waits else "")
        out.append({"value": kind, "label": label, "why": why, "disabled": bool(why) and not waits})
    usable = [o["value"] for o in out if not o["disabled"]]
    pick = chosen if chosen in usable or not usable else usable[0]
    for o in out:
        o["selected"] = o["value"] == pick
    return out


class DeviceSelect(forms.Select):
    """A <select> whose options for devices no worker serves are disabled, with why as their title."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unavailable: dict[str, str] = {}

    def create_option(self, name: str, value: Any, label: Any, selected: Any, index: int,
                      subindex: int | None = None, attrs: dict[str, Any] | None = None) -> dict[str, Any]:
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        why = self.unavailable.get(str(value))
        if why:
            option["attrs"] = {**option["attrs"], "disabled": True, "title": why}
        return option


def apply(field: forms.ChoiceField, served: devices.Served, initial: dict[str, Any]) -> None:
    """Make a form's device field tell the truth: labels and disabled options from `options`."""
    kinds = [str(d) for d, _ in field.choices]
    opts = options(kinds, str(initial.get("device") or ""), served)
    field.choices = [(o["value"], o["label"]) for o in opts]
    widget = field.widget if isinstance(field.widget, DeviceSelect) else DeviceSelect()
    widget.choices = field.choices
    widget.unavailable = {o["value"]: o["why"] for o in opts if o["disabled"]}
    field.widget = widget
    picked = next((o["value"] for o in opts if o["selected"]), None)
    if picked is not None and not served.serves(str(initial.get("device") or "")):
        initial["device"] = picked
