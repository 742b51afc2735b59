"""ninja's record of how each output was built (.ninja_log), kept true when a build directory moves.

torch builds a C++/CUDA extension with ninja in TORCH_EXTENSIONS_DIR/<name>, and ninja logs, for each output, a
hash of the command that made it. torch's commands name the sources by absolute path, so a build directory copied
into another child's work dir (kernels.parent.compile_seed: its paths replaced by the new work dir's, of the same length)
would be rebuilt whole for a "changed command line". relocated_log() rewrites those hashes: for every logged output
whose hash is that of its command in the manifest as written (before the move), the hash of its command in the
moved manifest. Anything else stays as it was, and ninja then rebuilds it, as it would without the seed: a wrong
guess here costs a build, never a stale object. Logs v5 (ninja up to 1.12: MurmurHash64A) and v7 (ninja 1.13:
rapidhash). The manifest subset read is what torch writes: variables, rules, build lines, defaults."""

from __future__ import annotations

import re
from collections.abc import Callable

MASK = (1 << 64) - 1
# torch's manifests and logs are a few KB: anything far larger is not parsed (the parent reads what a child wrote)
MAX_MANIFEST, MAX_LOG, MAX_VALUE = 1 << 20, 4 << 20, 1 << 20
MAX_EVALUATED, MAX_EDGES = 16 << 20, 64  # all the values a manifest's reading produces; its build lines
SAFE_PATH = re.compile(r"[A-Za-z0-9_+\-./]+")  # what ninja writes into $in/$out without shell quoting
VAR = re.compile(r"[A-Za-z0-9_-]+")
BRACED_VAR = re.compile(r"[A-Za-z0-9_.-]+")


def murmur64a(data: bytes, seed: int = 0xDECAFBADDECAFBAD) -> int:
    """MurmurHash64A, as ninja's build log v5 hashes a command."""
    m, r = 0xC6A4A7935BD1E995, 47
    h = (seed ^ (len(data) * m)) & MASK
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        k = int.from_bytes(data[i:i + 8], "little") * m & MASK
        k = (k ^ (k >> r)) * m & MASK
        h = (h ^ k) * m & MASK
    if whole < len(data):
        h = (h ^ int.from_bytes(data[whole:], "little")) * m & MASK
    h = (h ^ (h >> r)) * m & MASK
    return h ^ (h >> r)


RAPID_SECRET = (0x2D358DCCAA6C78A5, 0x8BB84B93962EACC9, 0x4B33A62ED433D4A3)


def _mix(a: int, b: int) -> int:
    product = a * b
    return (product & MASK) ^ (product >> 64)


def _u64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 8], "little")


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little")


def rapidhash(data: bytes, seed: int = 0xBDD89AA982704029) -> int:
    """rapidhash (its first version, default seed and secrets), as ninja's build log v7 hashes a command."""
    s0, s1, s2 = RAPID_SECRET
    n = len(data)
    seed ^= _mix(seed ^ s0, s1) ^ n
    if n <= 16:
        if n >= 4:
            delta = (n & 24) >> (n >> 3)
            a = (_u32(data, 0) << 32) | _u32(data, n - 4)
            b = (_u32(data, delta) << 32) | _u32(data, n - 4 - delta)
        elif n:
            a, b = (data[0] << 56) | (data[n >> 1] << 32) | data[n - 1], 0
        else:
            a = b = 0
    else:
        at, left = 0, n
        if left > 48:
            one = two = seed
            while left >= 48:
                seed = _mix(_u64(data, at) ^ s0, _u64(data, at + 8) ^ seed)
                one = _mix(_u64(data, at + 16) ^ s1, _u64(data, at + 24) ^ one)
                two = _mix(_u64(data, at + 32) ^ s2, _u64(data, at + 40) ^ two)
                at, left = at + 48, left - 48
            seed ^= one ^ two
        if left > 16:
            seed = _mix(_u64(data, at) ^ s2, _u64(data, at + 8) ^ seed ^ s1)
            if left > 32:
                seed = _mix(_u64(data, at + 16) ^ s2, _u64(data, at + 24) ^ seed)
        a, b = _u64(data, at + left - 16), _u64(data, at + left - 8)
    product = (a ^ s1) * (b ^ seed)
    return _mix((product & MASK) ^ s0 ^ n, (product >> 64) ^ s1)


HASHES: dict[str, Callable[[bytes], int]] = {"# ninja log v5": murmur64a, "# ninja log v7": rapidhash}


class Unsupported(Exception):
    """Something of the manifest this reader does not follow: the log is left as it was."""


def _evaluate(text: str, lookup: Callable[[str], str]) -> str:
    """A ninja value: `$$`, `$ `, `$:`, `$name`, `${name}` (the line continuation is joined before); Unsupported
    beyond MAX_VALUE characters (variables that expand each other into a huge value)."""
    out: list[str] = []
    i = size = 0
    while i < len(text):
        if size > MAX_VALUE:
            raise Unsupported("a value over MAX_VALUE characters")
        c = text[i]
        if c != "$":
            piece = c
            i += 1
        elif (nxt := text[i + 1:i + 2]) in ("$", " ", ":"):
            piece = nxt
            i += 2
        elif nxt == "{":
            end = text.find("}", i)
            if end < 0 or not BRACED_VAR.fullmatch(text[i + 2:end]):
                raise Unsupported(text[:80])
            piece = lookup(text[i + 2:end])
            i = end + 1
        elif match := VAR.match(text, i + 1):
            piece = lookup(match.group())
            i = match.end()
        else:
            raise Unsupported(text[:80])
        out.append(piece)
        size += len(piece)
    if size > MAX_VALUE:
        raise Unsupported("a value over MAX_VALUE characters")
    return "".join(out)


def _paths(text: str, evaluate: Callable[[str], str]) -> list[str]:
    """The paths of a build line's part, split at unescaped spaces."""
    marked = text.replace("$$", "\0d").replace("$ ", "\0s").replace("$:", "\0c")
    return [evaluate(part.replace("\0d", "$$").replace("\0s", "$ ").replace("\0c", "$:"))
            for part in marked.split(" ") if part]


def _lines(manifest: str) -> list[str]:
    """The manifest's logical lines: `$` at a line's end continues it; comments and blank lines dropped."""
    joined = re.sub(r"(?<!\$)((?:\$\$)*)\$\n[ \t]*", r"\1", manifest)
    return [line for line in joined.split("\n") if line.strip() and not line.lstrip().startswith("#")]


def _binding(line: str) -> tuple[str, str]:
    key, eq, value = line.strip().partition("=")
    if not eq or not VAR.fullmatch(key.strip()):
        raise Unsupported(line)
    return key.strip(), value.lstrip(" ")


def commands(manifest: str) -> dict[str, str]:
    """output -> the command that builds it, as ninja evaluates it (raises Unsupported beyond torch's subset)."""
    variables: dict[str, str] = {}
    rules: dict[str, dict[str, str]] = {}
    edges: list[tuple[list[str], str, list[str], dict[str, str]]] = []
    current: dict[str, str] | None = None  # the rule (values kept raw) or build line (values evaluated) indented under
    raw = False
    spent = [0]

    def evaluate(text: str, lookup: Callable[[str], str]) -> str:  # within MAX_EVALUATED for the whole manifest
        value = _evaluate(text, lookup)
        spent[0] += len(value)
        if spent[0] > MAX_EVALUATED:
            raise Unsupported("values over MAX_EVALUATED characters in all")
        return value

    def file_scope(name: str) -> str:
        return variables.get(name, "")

    def in_file(text: str) -> str:
        return evaluate(text, file_scope)

    for line in _lines(manifest):
        if line[0] in " \t":
            if current is None:
                raise Unsupported(line)
            key, value = _binding(line)
            current[key] = value if raw else in_file(value)  # a rule's are evaluated per edge
            continue
        word = line.split(" ", 1)[0]
        if word == "rule":
            current, raw = rules.setdefault(line.split(" ", 1)[1].strip(), {}), True
        elif word == "build":
            targets, colon, rest = line[len("build "):].replace("$:", "\0c").partition(":")
            if not colon:
                raise Unsupported(line)
            rule, _, inputs = rest.replace("\0c", "$:").strip().partition(" ")
            explicit = inputs.split("|", 1)[0]  # implicit (|) and order-only (||) inputs are not $in
            edges.append((_paths(targets.replace("\0c", "$:"), in_file), rule, _paths(explicit, in_file), {}))
            if len(edges) > MAX_EDGES:
                raise Unsupported("more build lines than MAX_EDGES")
            current, raw = edges[-1][3], False
        elif word == "default":
            current = None
        elif word in ("include", "subninja", "pool"):
            raise Unsupported(line)
        else:
            key, value = _binding(line)
            variables[key] = in_file(value)
            current = None
    found: dict[str, str] = {}
    for outs, rule, ins, bound in edges:
        if rule == "phony":
            continue
        if rule not in rules or not all(SAFE_PATH.fullmatch(p) for p in outs + ins):
            raise Unsupported(rule)
        command = _edge_value("command", {"in": " ".join(ins), "out": " ".join(outs), **bound}, rules[rule],
                              variables, {}, evaluate)
        found.update(dict.fromkeys(outs, command))
    return found


def _edge_value(name: str, edge: dict[str, str], rule: dict[str, str], variables: dict[str, str],
                done: dict[str, str], evaluate: Callable[[str, Callable[[str], str]], str], depth: int = 0) -> str:
    """A variable in a build edge's scope: $in/$out and the edge's bindings, then the rule's (evaluated in the
    edge's scope, each once: `done`), then the file's."""
    if depth > 16:
        raise Unsupported(name)
    if name in edge:
        return edge[name]
    if name in rule:
        if name not in done:
            done[name] = evaluate(rule[name],
                                  lambda inner: _edge_value(inner, edge, rule, variables, done, evaluate, depth + 1))
        return done[name]
    return variables.get(name, "")


def relocated_log(log: bytes, before: bytes, after: bytes) -> bytes | None:
    """The build log `log`, written for the manifest `before`, rewritten for the manifest `after` (the same build
    moved): each entry whose hash is its command's under `before` gets its command's hash under `after`. None when
    nothing could be rewritten (an unknown log version or manifest)."""
    if len(log) > MAX_LOG or len(before) > MAX_MANIFEST or len(after) > MAX_MANIFEST:
        return None
    try:
        lines = log.decode().split("\n")
        hashed = HASHES.get(lines[0].strip())
        old, new = commands(before.decode()), commands(after.decode())
    except (UnicodeDecodeError, Unsupported, IndexError):
        return None
    if hashed is None:
        return None
    changed = 0
    for k, line in enumerate(lines[1:], 1):
        fields = line.split("\t")
        if len(fields) != 5 or fields[3] not in old or fields[3] not in new:
            continue
        if fields[4] == format(hashed(old[fields[3]].encode()), "x"):
            fields[4] = format(hashed(new[fields[3]].encode()), "x")
            lines[k] = "\t".join(fields)
            changed += 1
    return "\n".join(lines).encode() if changed else None
