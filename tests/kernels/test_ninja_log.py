"""A torch extension's build directory planted in another child's work dir (kernels.parent.compile_seed) is up to date for
the real ninja: its build log's command hashes are rewritten for the moved paths (kernels.parent.ninja_log), for both log
versions in use (v5: ninja up to 1.12, v7: ninja 1.13)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernels.parent import compile_seed, ninja_log

# "true " and n times "x", as logged by the real ninja 1.11.1 (v5) and 1.13.2 (v7) for a rule `command = $cmd`
LOGGED = {0: ("2c6e59396f7a3684", "9816176dadc2d469"), 7: ("a57573af57db8af5", "a458018b97e07a23"),
          16: ("c595fa428c4852b4", "cbe4ea962d05a37b"), 47: ("e80f15bb36f15267", "b3ac98f35bfd5613"),
          500: ("b8dea5635730c8a", "cc51f3075b5d5e6e")}

MANIFEST = """ninja_required_version = 1.3
cxx = cp
cflags = -p

rule compile
  command = $cxx $cflags $in $out

rule link
  command = cat $in > $out

build main.o: compile {dir}/main.cpp

build ext.so: link main.o

default ext.so
"""


@pytest.mark.parametrize("n", sorted(LOGGED))
def test_the_hashes_are_ninjas(n: int) -> None:
    command = ("true " + "x" * n).encode()
    assert format(ninja_log.murmur64a(command), "x") == LOGGED[n][0]
    assert format(ninja_log.rapidhash(command), "x") == LOGGED[n][1]


def test_commands_are_evaluated_as_ninja_does() -> None:
    found = ninja_log.commands(MANIFEST.format(dir="/w/a") + "build y.o: compile ${cxx}/b.cpp\n  cflags = -q $cxx\n")
    assert found == {"main.o": "cp -p /w/a/main.cpp main.o", "ext.so": "cat main.o > ext.so",
                     "y.o": "cp -q cp cp/b.cpp y.o"}  # an edge's own binding, evaluated where it is written
    for beyond in ("include other.ninja\n", MANIFEST.format(dir="/w/a") + "build a$ b.o: compile x.cpp\n"):
        with pytest.raises(ninja_log.Unsupported):  # what the reader does not follow leaves the log as it was
            ninja_log.commands(beyond)


def test_a_manifest_that_expands_without_end_is_left_alone() -> None:
    """The parent reads what a child wrote: variables that expand each other into a huge value, or one rule variable
    referenced a thousand times at each of many levels, end as Unsupported at once (the log then stays as it was)."""
    doubling = "a0 = " + "x" * 1000 + "\n" + "".join(f"a{k} = " + f"$a{k - 1}" * 1000 + "\n" for k in range(1, 4))
    with pytest.raises(ninja_log.Unsupported):
        ninja_log.commands(doubling)
    nested = "rule r\n  command = " + "$v1" * 1000 + "\n" + "".join(
        f"  v{k} = " + f"$v{k + 1}" * 1000 + "\n" for k in range(1, 12)) + "build o: r\n"
    assert ninja_log.commands(nested) == {"o": ""}  # each rule variable evaluated once per edge
    wide = "a = " + "x" * 100_000 + "\n" + "".join(f"b{k} = " + "$a" * 10 + "\n" for k in range(40))
    with pytest.raises(ninja_log.Unsupported):  # many variables of a million characters each: a budget in all
        ninja_log.commands(wide)
    many = "rule r\n  command = true\n" + "".join(f"build o{k}: r\n" for k in range(ninja_log.MAX_EDGES + 1))
    with pytest.raises(ninja_log.Unsupported):
        ninja_log.commands(many)
    assert ninja_log.relocated_log(b"# ninja log v5\n", b"x" * (ninja_log.MAX_MANIFEST + 1), b"") is None
    assert ninja_log.commands("a = " + "$$" * 50_000 + "$\n  b\n") == {}  # a long run of `$` is read once


def extension(work_dir: Path) -> Path:
    ext = work_dir / "cache" / "torch_extensions" / "ext"
    ext.mkdir(parents=True)
    (ext / "build.ninja").write_text(MANIFEST.format(dir=ext))
    (ext / "main.cpp").write_text("int main() { return 0; }\n")
    return ext


def ninja(ext: Path) -> str:
    done = subprocess.run(["ninja", "-d", "explain"], cwd=ext, capture_output=True, text=True, check=True)
    return done.stdout + done.stderr


@pytest.mark.slow  # the real ninja, three times (well under a second)
@pytest.mark.skipif(shutil.which("ninja") is None, reason="no ninja on this machine")
def test_a_planted_build_is_up_to_date_and_without_the_rewrite_it_is_rebuilt(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root, built = tmp_path / "root", tmp_path / "wd-aaaaaaa"
    ext = extension(built)
    assert "cp -p" in ninja(ext) and (ext / "ext.so").exists()
    assert "no work to do" in ninja(ext)
    assert compile_seed.keep(built, root, "problem", "cpu", "candidate") > 0

    moved = tmp_path / "wd-bbbbbbb"  # another child of the same candidate: the same path length
    assert compile_seed.plant(moved, root, "problem", "cpu", candidate_source="candidate") > 0
    planted = moved / "cache" / "torch_extensions" / "ext"
    assert str(planted) in (planted / "build.ninja").read_text()
    assert "no work to do" in ninja(planted)

    monkeypatch.setattr(ninja_log, "relocated_log", lambda *args: None)  # the log as it was: every command changed
    again = tmp_path / "wd-ccccccc"
    assert compile_seed.plant(again, root, "problem", "cpu", candidate_source="candidate") > 0
    assert "command line changed" in ninja(again / "cache" / "torch_extensions" / "ext")
