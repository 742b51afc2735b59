"""The STARK engine core: tree, score, policies, context windows, anchors, agents, events, the loop, the verdict.

Plain Python: nothing here imports Django, so it runs inline (tests, CLI, a bare GPU host) and under RQ.
"""

from search.engine.agents import (
    AgentError,
    CodeAgent,
    CodeAnswer,
    DebugAgent,
    MalformedAnswer,
    PlanAgent,
    PlanAnswer,
    Team,
    Usage,
)
from search.engine.anchors import AnchorError
from search.engine.context import ContextWindow, WindowItem, build_window, window_members
from search.engine.engine import Engine, Finish
from search.engine.events import EVENT_TYPES, Event, EventLog
from search.engine.limits import DEFAULT_BUDGET, Limits
from search.engine.loop import RunSummary, run
from search.engine.node import Node, score
from search.engine.policies import POLICY_NAMES, Policy, get_policy
from search.engine.tree import Tree

__all__ = [
    "DEFAULT_BUDGET", "EVENT_TYPES", "POLICY_NAMES", "AgentError", "AnchorError", "CodeAgent", "CodeAnswer",
    "ContextWindow", "DebugAgent", "Engine", "Event", "EventLog", "Finish", "Limits", "MalformedAnswer", "Node",
    "PlanAgent", "PlanAnswer", "Policy", "RunSummary", "Team", "Tree", "Usage",
    "WindowItem", "build_window", "get_policy", "run", "score", "window_members",
]
