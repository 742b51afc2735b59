"""The new-run form: where the problem comes from, and the run's settings (checked again by the service)."""

from __future__ import annotations

from pathlib import Path

from django import forms

from kernels.parent.settings import FUZZ_LEVELS
from search.engine.limits import DEFAULT_BUDGET
from search.llm.pricing import DEFAULT_COST_LIMIT_USD
from search.llm.settings import PROVIDERS
from search.run_settings import (
    DEFAULT_BASELINES,
    DEFAULT_DEVICE,
    DEVICE_KINDS,
    GPU_DEVICE,
    MAX_BUDGET,
    MAX_PARALLEL,
    ROLES,
    TARGET_ABOUT,
)
from search.teams import OFFLINE_TEAM, TEAMS
from stark_web.studio.pages.providers import any_ready

TEAM_HELP = {name: entry.about for name, entry in TEAMS.items() if entry.offered}  # `scripted` is for tests only
# The form's fields that are run options of LLM teams, sent only when an LLM team is chosen.
LLM_FIELDS = ("provider", "model", "base_url", *(f"{r}_{x}" for r in ROLES for x in ("provider", "model")))


def host_has_gpu() -> bool:
    """A cheap guess for the default device (the workers may differ; the form lets the user choose)."""
    return Path("/dev/nvidia0").exists()


class NewRunForm(forms.Form):
    problem = forms.FileField(required=False, label="Upload a problem file")
    problem_source = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}),
                                     label="Or paste its source")
    problem_name = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)
    name = forms.CharField(required=False, max_length=200, label="Run name")
    team = forms.ChoiceField(choices=[(t, f"{t} — {h}") for t, h in TEAM_HELP.items()])
    device = forms.ChoiceField(choices=[(d, d) for d in DEVICE_KINDS])
    target = forms.ChoiceField(required=False, choices=[("", "default for the device")]
                               + [(t, f"{t} — {about}") for t, about in TARGET_ABOUT.items()])
    budget = forms.IntegerField(min_value=1, max_value=MAX_BUDGET, initial=DEFAULT_BUDGET, label="Budget (attempts)")
    parallel = forms.IntegerField(min_value=1, max_value=MAX_PARALLEL, initial=1, label="Attempts in flight")
    seed = forms.IntegerField(required=False, min_value=0, initial=0)
    time_limit_s = forms.FloatField(required=False, min_value=1, label="Time limit (s)")
    cost_limit_usd = forms.FloatField(  # empty: an LLM team gets the default (search.llm.pricing)
        required=False, min_value=0.01, label=f"Cost limit (USD, default {DEFAULT_COST_LIMIT_USD:g} for LLM teams)",
        widget=forms.NumberInput(attrs={"placeholder": f"{DEFAULT_COST_LIMIT_USD:g}", "step": "any"}))
    review_plans = forms.BooleanField(required=False, label="Review each plan before it is coded")
    review_timeout_s = forms.FloatField(required=False, min_value=1, label="Review timeout (s)")
    provider = forms.ChoiceField(required=False, choices=[("", "server default"), *((p, p) for p in PROVIDERS)])
    model = forms.CharField(required=False, max_length=200)
    base_url = forms.CharField(required=False, max_length=500, label="Server URL (openai-compatible)",
                               help_text="one of the LLM endpoints this server allows (STARK_LLM_BASE_URLS)")

    strict_temperatures = forms.BooleanField(
        required=False, label="Strict temperatures",
        help_text="stop the run with an error when a model refuses a role's temperature (plan 0.8, code and debug "
                  "0.1), instead of letting that role run without it")

    no_stream = forms.BooleanField(
        required=False, label="Don't stream",
        help_text="send every LLM call without streaming (a model the provider refuses to stream is sent again "
                  "without it anyway, and the run says so)")
    timeout_s = forms.FloatField(required=False, min_value=1, max_value=3600, label="LLM call timeout (s)",
                                 help_text="seconds one call may take to answer (default 600)")

    eval_correctness_trials = forms.IntegerField(required=False, min_value=1, max_value=100, initial=5, label="Correctness trials")
    eval_timing_runs = forms.IntegerField(required=False, min_value=1, max_value=10000, initial=100, label="Timed runs")
    eval_warmup_runs = forms.IntegerField(required=False, min_value=0, max_value=1000, initial=10, label="Warm-up runs")
    eval_baselines = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, initial=list(DEFAULT_BASELINES), label="Baselines",
        choices=[("eager", "eager"), ("compile", "torch.compile"), ("compile-max-autotune", "max-autotune")])
    eval_roofline = forms.BooleanField(required=False, initial=True, label="Roofline figure")
    eval_fuzz = forms.ChoiceField(required=False, initial="standard", label="Fuzzing",
                                  choices=[(level, level) for level in FUZZ_LEVELS],
                                  help_text="the fuzzing stage after the standard trials (docs/fuzzing.md): off "
                                            "judges each attempt faster, thorough tries more variants")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial.setdefault("team", "stark" if any_ready() else OFFLINE_TEAM)
            self.initial.setdefault("device", GPU_DEVICE if host_has_gpu() else DEFAULT_DEVICE)
        for role in ROLES:
            self.fields[f"{role}_provider"] = forms.ChoiceField(required=False, choices=self.fields["provider"].choices)
            self.fields[f"{role}_model"] = forms.CharField(required=False, max_length=200)

    def role_rows(self) -> list[tuple[str, forms.BoundField, forms.BoundField]]:
        return [(role, self[f"{role}_provider"], self[f"{role}_model"]) for role in ROLES]

    def run_data(self) -> dict:
        """The cleaned fields as the service's parse_run_settings reads them (LLM options only for LLM teams)."""
        d = self.cleaned_data
        data = {k: d.get(k) for k in ("team", "device", "target", "budget", "parallel", "seed", "time_limit_s",
                                     "cost_limit_usd", "name")}
        if d.get("review_plans"):  # human steering: each plan waits for the user
            data["review_plans"] = True
            data["review_timeout_s"] = d.get("review_timeout_s")
        if d.get("team") != OFFLINE_TEAM:
            for key in LLM_FIELDS:
                if d.get(key):
                    data[key] = d[key]
            if d.get("strict_temperatures"):
                data["strict_temperatures"] = True
            if d.get("no_stream"):
                data["stream"] = False
            if d.get("timeout_s"):
                data["timeout_s"] = d["timeout_s"]
        given = {"correctness_trials": d.get("eval_correctness_trials"), "timing_runs": d.get("eval_timing_runs"),
                 "warmup_runs": d.get("eval_warmup_runs"), "baselines": d.get("eval_baselines") or None,
                 "fuzz": d.get("eval_fuzz") or None}
        data["eval"] = {k: v for k, v in given.items() if v is not None}
        if "eval_present" in self.data:  # the page's form: an unticked box is simply absent
            data["eval"]["roofline"] = bool(d.get("eval_roofline"))
        return {k: v for k, v in data.items() if v not in (None, "")}
