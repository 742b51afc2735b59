"""Re-render the kb_rules tables from their saved trees (no GPU): every `trees*.tar.gz` under docs/benchmarks/kb_rules/
gives the table beside it (trees.tar.gz -> kb_rules.md/.json, trees-streams.tar.gz -> kb_rules-streams.md/.json), and
h200-2026-12-03-alone's trees give the headline h200.md/.json, each through benchmarks/kb_table.py with the metrics of
the day (search.bench_metrics, search.engine.verdict). The title's device note is kept from the table it replaces.

    python -m benchmarks.kb_rerender [--root docs/benchmarks/kb_rules]
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path

from benchmarks import kb_table

HEADLINE = ("h200-2026-12-03-alone/trees.tar.gz", "h200")


def device_note(md: Path) -> str | None:
    """The device note of an existing table's title ("# Rules team ... — NOTE, DATE")."""
    if not md.exists():
        return None
    title = md.read_text().splitlines()[0]
    head, sep, rest = title.partition(" — ")
    return rest.rsplit(", ", 1)[0] if sep else None


def render(archive: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".json") and ".." not in m.name
                   and not m.name.startswith("/")]
        tar.extractall(tmp, members=members)  # noqa: S202 (our own committed archives; names checked above)
        trees = sorted(Path(tmp).rglob("*.json"))
        note = device_note(out.with_suffix(".md"))
        args = ["--out", str(out), *([] if note is None else ["--device-note", note]), *map(str, trees)]
        kb_table.main(args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="docs/benchmarks/kb_rules")
    root = Path(ap.parse_args(argv).root)
    for archive in sorted(root.glob("*/trees*.tar.gz")):
        suffix = archive.name.removeprefix("trees").removesuffix(".tar.gz")
        render(archive, archive.parent / f"kb_rules{suffix}")
    render(root / HEADLINE[0], root / HEADLINE[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
