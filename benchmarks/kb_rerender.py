"""Re-render the kb-rules tables from their saved trees (no GPU): every `trees*.tar.gz` under the root (default
benchmarks/results/kb-rules) gives the table beside it (trees.tar.gz -> kb_rules.md/.json, trees-streams.tar.gz ->
kb_rules-streams.md/.json), through benchmarks/kb_table.py with the current metrics (search.bench_metrics,
search.engine.verdict). The title's device note is kept from the table it replaces.

    python -m benchmarks kb-rerender [--root benchmarks/results/kb-rules]
"""

from __future__ import annotations

import sys
import tarfile
import tempfile
from pathlib import Path

from benchmarks import common, kb_table


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
    ap = common.parser(__doc__, device=None, out_help="the folder for the tables (default: beside each archive)")
    ap.add_argument("--root", default="benchmarks/results/kb-rules")
    args = ap.parse_args(argv)
    root = Path(args.root)
    archives = sorted(root.rglob("trees*.tar.gz"))
    if not archives:
        ap.error(f"no trees*.tar.gz under {root}: pass --root, a folder holding a bench's saved trees")
    for archive in archives:
        suffix = archive.name.removeprefix("trees").removesuffix(".tar.gz")
        folder = Path(args.out) / archive.parent.relative_to(root) if args.out else archive.parent
        if args.out:  # the device note is read from the table it replaces
            folder.mkdir(parents=True, exist_ok=True)
            for old in archive.parent.glob(f"kb_rules{suffix}.md"):
                (folder / old.name).write_text(old.read_text())
        render(archive, folder / f"kb_rules{suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
