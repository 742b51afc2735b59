"""Failure logs cut to what the candidate's author can act on, before a window shows them (the debug agent's, and
the single agent's when it fixes a failed node).

The harness's logs (kernels/parent/evaluate.py: the build log, the run log with the traceback of the reported error) hold
long tracebacks through the harness's own child (kernels/child/candidate.py, kernels/child/loading.py, ...), importlib and
torch, and the window shows only their tail. `trim_log` keeps:
- every frame of the candidate's own module (its file is `candidate.py` in the child's work directory), with its
  source line and carets;
- of each run of library frames (torch, Triton, the standard library), the first and the last, without carets;
- every exception line (the final one above all), each line bounded;
- compiler output (g++/nvcc/ptxas/Triton diagnostics and the source lines they quote) intact, up to a bound, and
  compiler command lines shortened;
and drops the harness's frames (paths under kernels/) and importlib's, saying how many frames were left out.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from search.engine.agents import ContextWindow

CANDIDATE_FILE = "candidate.py"  # kernels.child.candidate loads the candidate as <work dir>/candidate.py
MAX_LINE = 400  # an exception or other line longer than this is cut
MAX_COMMAND = 160  # a compiler command line (c++/nvcc/ninja) is cut to this
MAX_DIAGNOSTIC = 1000  # a compiler diagnostic line (long template errors) is cut only past this
MAX_COMPILER_LINES = 40  # compiler diagnostics and quoted source kept, in order

FRAME_RE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
CARET_RE = re.compile(r"^\s*[\^~]+\s*$")
COMMAND_RE = re.compile(r"^\s*(\[\d+/\d+\]\s+)?(\S*/)?(c\+\+|g\+\+|gcc|cc|clang\+\+|nvcc|ninja -v)\s")
DIAGNOSTIC_RE = re.compile(r"(:\d+(:\d+)?:\s*|\(\d+\):\s*)(fatal error|error|warning|note)\b|^ptxas\b|"
                           r"\berror detected in the compilation\b|^\s*\d+\s*\|\s|^\s*\|\s+[\s\^~]*$|"
                           r"^(FAILED:|ninja: )|: In (member )?function\b|\bIn file included from\b")
COMMAND_IN_LINE_RE = re.compile(r"\[\d+/\d+\]\s+\S*(c\+\+|g\+\+|nvcc)\s")  # ninja's command, inside a message
STDLIB_RE = re.compile(r"^.*/lib/python3\.\d+/")
HARNESS_CANDIDATE = f"kernels/child/{CANDIDATE_FILE}"  # the harness module that loads and runs the candidate
HARNESS_RE = re.compile(r"(^|/)kernels/[\w/]+\.py$")
CHAIN = ("The above exception was the direct cause of the following exception:",
         "During handling of the above exception, another exception occurred:")


def _kind(path: str) -> str:
    """candidate, harness (the harness's own modules, importlib's bootstrap) or library (torch, Triton, stdlib)."""
    # the harness's own kernels/child/candidate.py shares the file name of the candidate (<work dir>/candidate.py)
    if (path.rsplit("/", 1)[-1] == CANDIDATE_FILE and not path.endswith(HARNESS_CANDIDATE)) or path == "<string>":
        return "candidate"
    if path.startswith("<frozen ") or ("site-packages" not in path and HARNESS_RE.search(path)):
        return "harness"
    return "library"


def _short(path: str) -> str:
    """A frame's path as the prompt shows it: the candidate's file by its name, a library's from its package (or
    the standard library's directory)."""
    if _kind(path) == "candidate":
        return CANDIDATE_FILE
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return STDLIB_RE.sub("", path)


def _cut(line: str, most: int = MAX_LINE) -> str:
    return line if len(line) <= most else f"{line[:most]}… ({len(line) - most} more characters)"


def _frames(lines: list[str], start: int) -> tuple[list[list[str]], int]:
    """The frames of a traceback whose header is at start - 1: each its File line and the indented lines under it."""
    frames: list[list[str]] = []
    k = start
    while k < len(lines) and lines[k].startswith(" "):
        if FRAME_RE.match(lines[k]):
            frames.append([lines[k]])
        elif frames:
            frames[-1].append(lines[k])
        k += 1
    return frames, k


def _render_frames(frames: list[list[str]]) -> list[str]:
    out: list[str] = []
    omitted = 0

    def note() -> None:
        nonlocal omitted
        if omitted:
            out.append(f"  [... {omitted} frame(s) of the harness and libraries left out]")
            omitted = 0

    kinds = [_kind(FRAME_RE.match(f[0]).group("path")) for f in frames]  # type: ignore[union-attr]
    for k, (frame, kind) in enumerate(zip(frames, kinds)):
        match = FRAME_RE.match(frame[0])
        assert match is not None
        head = f'  File "{_short(match.group("path"))}", line {match.group("line")}, in {match.group("func")}'
        if kind == "harness":
            omitted += 1
            continue
        if kind == "library":
            # the first and the last of a run of library frames (harness frames do not break a run)
            others = [j for j in range(len(frames)) if kinds[j] != "harness"]
            at = others.index(k)
            first = at == 0 or kinds[others[at - 1]] != "library"
            last = at == len(others) - 1 or kinds[others[at + 1]] != "library"
            if not (first or last):
                omitted += 1
                continue
            note()
            out.append(head)
            out += [_cut(t, MAX_LINE) for t in frame[1:] if not CARET_RE.match(t)][:1]
            continue
        note()
        out.append(head)
        out += [_cut(t, MAX_LINE) for t in frame[1:]]
    note()
    return out


def trim_log(text: str) -> str:
    """The log with the harness's and libraries' traceback frames cut, the candidate's frames, every exception line
    and the compiler's diagnostics kept (see the module's doc)."""
    if not text:
        return text
    lines = text.splitlines()
    out: list[str] = []
    seen: set[str] = set()
    compiler = 0
    k = 0
    while k < len(lines):
        line = lines[k].rstrip()
        if line.strip() == "Traceback (most recent call last):":
            frames, k = _frames(lines, k + 1)
            out.append(line.strip())
            out += _render_frames(frames)
            continue
        k += 1
        if COMMAND_RE.match(line):
            out.append(_cut(line, MAX_COMMAND))
            continue
        inside = COMMAND_IN_LINE_RE.search(line)
        if inside:  # an exception message quoting the compiler's command line: the command is in the build log
            out.append(_cut(line, inside.start() + MAX_COMMAND // 2))
            continue
        if DIAGNOSTIC_RE.search(line):
            if line in seen and len(line.strip()) > 8:  # the same diagnostic repeated by a later exception message
                continue
            seen.add(line)
            compiler += 1
            if compiler <= MAX_COMPILER_LINES:
                out.append(_cut(line, MAX_DIAGNOSTIC))
            elif compiler == MAX_COMPILER_LINES + 1:
                out.append(f"[... more compiler output left out; the first {MAX_COMPILER_LINES} lines are above]")
            continue
        out.append(_cut(line))
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def _trimmed_node(node: Any) -> Any:
    logs = (node.result or {}).get("logs") if isinstance(getattr(node, "result", None), dict) else None
    if not isinstance(logs, dict) or not any(isinstance(v, str) and v for v in logs.values()):
        return node
    trimmed = {k: trim_log(v) if isinstance(v, str) else v for k, v in logs.items()}
    return dataclasses.replace(node, result={**node.result, "logs": trimmed})


def trimmed_window(window: ContextWindow) -> ContextWindow:
    """A copy of the window whose nodes' failure logs are trimmed (trim_log); the tree's nodes are not touched. The
    copy shares the window's feedback, reflections and stream."""
    items = [dataclasses.replace(item, node=_trimmed_node(item.node)) for item in window.items]
    return dataclasses.replace(window, items=items, target=_trimmed_node(window.target),
                               root=_trimmed_node(window.root))
