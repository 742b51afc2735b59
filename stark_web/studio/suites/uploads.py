"""A suite's inputs from a request: its problems (uploaded files, a zip of KernelBench level folders `level1/…py`, or a
bundled set), its teams (names, or objects with a label and options: two configurations of one team side by side)
and its common run settings. Every mistake is a SettingError naming the field."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from search.run_settings import SettingError
from stark_web.studio.service.inputs import check_values, loads, plain_text, utf8

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "problems"
BUNDLED = ("level1", "level2", "level3")
MAX_PROBLEMS = 300
MAX_TEAMS = 8
# Run settings a suite passes to each of its runs (the team and the name are per member).
RUN_FIELDS = ("parallel", "device", "target", "seed", "eval", "time_limit_s", "cost_limit_usd", "team_options")


@dataclass(frozen=True)
class Upload:
    key: str  # level/name
    level: str
    name: str
    source: str


def bundled_sets() -> list[str]:
    return [s for s in BUNDLED if (EXAMPLES / s).is_dir()]


def _text(raw: bytes, field: str) -> str:
    limit = settings.STARK_MAX_UPLOAD_BYTES
    if len(raw) > limit:
        raise SettingError(field, f"is {len(raw)} bytes; the limit is {limit} bytes per problem (STARK_MAX_UPLOAD_BYTES)")
    text = utf8(raw, field)
    if "\x00" in text:
        raise SettingError(field, "contains NUL bytes; upload Python source files")
    return text


def _upload(path: str, raw: bytes, field: str, default_level: str) -> Upload:
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    name = plain_text(parts[-1].removesuffix(".py"), field, 100)
    level = plain_text(parts[-2], field, 100) if len(parts) > 1 else default_level
    if not name:
        raise SettingError(field, f"{path!r} has no file name")
    return Upload(f"{level}/{name}", level, name, _text(raw, f"{field}[{path}]"))


def from_zip(raw: bytes, field: str = "zip") -> list[Upload]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise SettingError(field, f"is not a zip file ({len(raw)} bytes, starting {raw[:8]!r}); send a zip of KernelBench level folders (level1/….py)") from None
    found = []
    for info in archive.infolist():
        path = info.filename
        if info.is_dir() or not path.endswith(".py") or path.endswith("__init__.py") or "__MACOSX" in path:
            continue
        if info.file_size > settings.STARK_MAX_UPLOAD_BYTES:
            raise SettingError(f"{field}[{path}]", f"is {info.file_size} bytes; the limit is "
                                                   f"{settings.STARK_MAX_UPLOAD_BYTES} (STARK_MAX_UPLOAD_BYTES)")
        found.append(_upload(path, archive.read(info), field, "problems"))
        if len(found) > MAX_PROBLEMS:
            raise SettingError(field, f"holds more than {MAX_PROBLEMS} problems; split the suite")
    if not found:
        raise SettingError(field, "holds no .py problem files; put KernelBench files in level folders (level1/….py)")
    return found


def from_set(name: str) -> list[Upload]:
    if name not in bundled_sets():
        raise SettingError("set", f"unknown set {name!r}; use one of {', '.join(bundled_sets())}")
    return [Upload(f"{name}/{p.stem}", name, p.stem, p.read_text()) for p in sorted((EXAMPLES / name).glob("*.py"))
            if p.name != "__init__.py"]


def read_problems(files: Any, data: dict[str, Any]) -> list[Upload]:
    """From `problems` (files, multipart), `zip` (a file), `set` (a bundled set's name), in that order of preference;
    several sources add up. Duplicate keys (level/name) are a 400."""
    found: list[Upload] = []
    for f in files.getlist("problems"):
        if not f.name and not f.size:
            continue  # a form's empty file input
        found.append(_upload(f.name or "problem.py", f.read(), "problems", "problems"))
    archive = files.get("zip")
    if archive is not None and (archive.name or archive.size):
        found.extend(from_zip(archive.read()))
    if data.get("set"):
        found.extend(from_set(str(data["set"])))
    if not found:
        raise SettingError("problems", "send problem files as `problems`, a zip of level folders as `zip`, or a "
                                       f"bundled set as `set` ({', '.join(bundled_sets())})")
    keys = [u.key for u in found]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise SettingError("problems", f"{dup} appears twice; each level/name once")
    if len(found) > MAX_PROBLEMS:
        raise SettingError("problems", f"{len(found)} problems; at most {MAX_PROBLEMS} per suite")
    return found


def read_teams(raw: Any) -> list[dict[str, Any]]:
    """[{"label", "team", "team_options"}] from a list (names or objects) or its JSON text or comma-separated names."""
    if isinstance(raw, str):
        raw = loads(raw, "teams") if raw.strip().startswith("[") else [t.strip() for t in raw.split(",") if t.strip()]
    if not isinstance(raw, list) or not raw:
        raise SettingError("teams", "name one or more teams: a list (e.g. [\"rules\", \"stark\"]) or comma-separated")
    if len(raw) > MAX_TEAMS:
        raise SettingError("teams", f"{len(raw)} teams; at most {MAX_TEAMS} per suite")
    teams: list[dict[str, Any]] = []
    for k, item in enumerate(raw):
        where = f"teams[{k}]"
        if isinstance(item, str):
            item = {"team": item}
        if not isinstance(item, dict) or not isinstance(item.get("team"), str) or not item["team"].strip():
            raise SettingError(where, "must be a team name or an object with `team` (and optional `label`, "
                                      "`team_options`)")
        options = item.get("team_options") or {}
        if not isinstance(options, dict):
            raise SettingError(f"{where}.team_options", "must be a JSON object")
        label = plain_text(item.get("label") or item["team"], f"{where}.label", 60)
        if not label or any(t["label"] == label for t in teams):
            raise SettingError(f"{where}.label", f"{label!r} is used twice; give each entry its own `label`")
        teams.append({"label": label, "team": item["team"].strip(), "team_options": options})
    return teams


def run_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The runs' common settings from the request (JSON text of eval/team_options decoded)."""
    out = {k: data[k] for k in RUN_FIELDS if data.get(k) not in (None, "")}
    for name in ("eval", "team_options"):
        if isinstance(out.get(name), str):
            out[name] = loads(out[name], name)
    check_values(out)
    return json.loads(json.dumps(out))
