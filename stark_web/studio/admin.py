"""Admin pages for problems, runs, nodes, events and API tokens (read-mostly: the engine owns the tree)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from stark_web.studio.models import ApiToken, Event, Node, Problem, Run
from stark_web.studio.service.settings import SettingError, check_stored_options


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "hash", "created_at")
    search_fields = ("name", "hash", "owner__username")
    readonly_fields = ("hash", "summary", "created_at")


class NodeInline(admin.TabularInline):
    model = Node
    fields = ("node_id", "parent", "attempt", "role", "status", "verdict", "runtime_ms", "speedup_vs_eager")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


class RunForm(forms.ModelForm):
    """Staff may edit a run's team options, but not past the operator's rules (the workers re-check them too)."""

    class Meta:
        model = Run
        fields = "__all__"

    def clean_team_options(self) -> Any:
        options = self.cleaned_data.get("team_options")
        try:
            check_stored_options(options if options is not None else {})
        except SettingError as exc:
            raise forms.ValidationError(f"{exc.field}: {exc.message}") from None
        return options


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    form = RunForm
    list_display = ("id", "name", "owner", "team", "status", "attempts", "budget", "best_node",
                    "best_speedup_vs_eager", "cost_usd", "created_at")
    list_filter = ("status", "team", "device")
    search_fields = ("name", "owner__username", "problem__name")
    readonly_fields = ("last_seq", "attempts", "best_node", "best_runtime_ms", "best_speedup_vs_eager",
                       "reference_runtime_ms", "cost_usd", "input_tokens", "output_tokens", "created_at",
                       "started_at", "finished_at", "updated_at")
    filter_horizontal = ("shared_with",)
    inlines = [NodeInline]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "node_id", "parent", "attempt", "role", "status", "verdict", "runtime_ms",
                    "phase", "tries", "job_id")
    list_filter = ("status", "verdict", "role")
    search_fields = ("run__id", "job_id")


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "seq", "type", "node", "created")
    list_filter = ("type",)
    search_fields = ("run__id",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("id", "user", "prefix", "name", "created_at", "last_used_at")
    readonly_fields = ("digest", "prefix", "created_at", "last_used_at")
