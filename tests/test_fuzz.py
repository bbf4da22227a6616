"""Fuzzing the file-facing paths.

Every input goes through what a user can point sessiontree at:

* ``check_bytes`` and ``repair_bytes`` (``check`` / ``check --repair``),
  which must never raise;
* ``read_session_file`` (what ``open``/``import`` read with);
* import into a memory and an SQLite store, as ``sessiontree import`` does
  (``read_session_file`` then ``SessionManager.import_session``), followed by
  building the model context of what was imported;
* agreement: import refuses the file exactly when ``check`` reports a code
  whose ``import_accepts`` flag is false;
* what reads across sessions, over each store the input was imported into:
  the listing, search and the usage report (``list``, ``search``, ``stats``),
  and ``verify`` (``check --store``); a timestamp out of range or a lone
  surrogate in any field affects only its own session;
* for a subset, the CLI itself (``sessiontree check``, ``import``, then
  ``list``, ``stats``, ``search``, ``check --store`` and ``context
  --historical`` over the imported store) and the viewer's list page.

The only exceptions allowed are the library's own: :class:`SessionError`
subclasses and :class:`sessiontree.jsonio.NestingError` (a ``ValueError``).
Anything else (``TypeError``, ``KeyError``, ``RecursionError``,
``UnicodeError``, ...) is a defect and fails the test with the mutation,
base file, seed and index that reproduce it.

Inputs: a deterministic mutation corpus (bases: ``examples/*.jsonl`` and
windows of ``../shared/corpus`` (when beside the checkout); mutations: byte flips, truncation at
every offset class, NUL runs, glued/duplicated/dropped lines, wrong JSON
types in every field, deep nesting, huge strings, invalid UTF-8, lone
surrogate escapes, a lone surrogate in every string of a record, timestamps
out of range (past year 9999, before year 1, 1e300, text) in the header,
the entry and the message, BOM, CRLF), and Hypothesis-built sessions whose
strings may hold lone surrogates and whose timestamps may be out of range.

Sizes: the default run tries ``DEFAULT_N`` mutations and 100 Hypothesis
examples (a few seconds). The long runs are marked ``slow`` and, since this
suite runs ``slow`` tests by default, also skipped unless
``$SESSIONTREE_FUZZ_N`` is set: ``SESSIONTREE_FUZZ_N=5000 pytest -m slow
tests/test_fuzz.py`` runs that many mutations and
``$SESSIONTREE_FUZZ_HYPOTHESIS_N`` (default 2000) Hypothesis examples.
``$SESSIONTREE_FUZZ_SEED`` changes the seed (default 20260210).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from sessiontree.check.checker import CODES, check_bytes, repair_bytes
from sessiontree.cli import cli
from sessiontree.errors import SessionError
from sessiontree.format import jsonio
from sessiontree.session.importing import read_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore
from support import field_paths

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CORPUS = corpus.shared()  # windows of the whole corpus join the bases when it is beside the checkout
SEED = int(os.environ.get("SESSIONTREE_FUZZ_SEED", "20260210"))
DEFAULT_N = 300
SLOW_N = int(os.environ.get("SESSIONTREE_FUZZ_N", "0"))
# Opt-in even in the full run (``-m ""``, which includes ``slow``): these take minutes.
long_run = pytest.mark.skipif(SLOW_N <= 0, reason="long fuzz run: set SESSIONTREE_FUZZ_N (e.g. 5000)")
CORPUS_WINDOW = 40  # lines of a corpus file per base (the files are megabytes)

#: Exceptions that are the library's own, clear answer to bad input.
ALLOWED = (SessionError, jsonio.NestingError)


# --------------------------------------------------------------------------
# Bases


def _bases() -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every base file: the examples, then corpus windows."""
    bases = [(p.name, p.read_bytes()) for p in sorted(EXAMPLES.glob("*.jsonl"))]
    if CORPUS.is_dir():
        rng = random.Random(SEED)
        for path in corpus.shared_files():  # pi files; the other agents have their own tests
            lines = path.read_bytes().split(b"\n")
            header, body = lines[0], [line for line in lines[1:] if line]
            for _window in range(3):
                start = rng.randrange(max(1, len(body) - CORPUS_WINDOW))
                chunk = body[start:start + CORPUS_WINDOW]
                bases.append((f"{path.name}[{start}:+{CORPUS_WINDOW}]", b"\n".join([header, *chunk]) + b"\n"))
    return bases


# --------------------------------------------------------------------------
# Mutations: (bytes, rng) -> bytes


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _pick_line(data: bytes, rng: random.Random) -> tuple[list[bytes], int]:
    lines = _lines(data)
    candidates = [i for i, line in enumerate(lines) if line.strip()] or [0]
    return lines, rng.choice(candidates)


def byte_flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def truncate_inside_line(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(1, max(2, len(data)))]


def truncate_at_newline(data: bytes, rng: random.Random) -> bytes:
    cuts = [i for i, b in enumerate(data) if b == 0x0A]
    cut = rng.choice(cuts) if cuts else len(data)
    return data[:cut + rng.choice([0, 1])]  # before or after the newline


def truncate_inside_utf8(data: bytes, rng: random.Random) -> bytes:
    starts = [i for i, b in enumerate(data) if b >= 0xC0]
    if not starts:  # make one: an e-acute inside the first string
        data = data.replace(b'":"', '":"\u00e9'.encode(), 1)
        starts = [i for i, b in enumerate(data) if b >= 0xC0]
    if not starts:
        return data[:-1]
    return data[:rng.choice(starts) + 1]


def truncate_inside_escape(data: bytes, rng: random.Random) -> bytes:
    escapes = [i for i in range(len(data) - 1) if data[i] == 0x5C]
    if not escapes:
        data = data.replace(b'":"', b'":"\\u00e9', 1)
        escapes = [i for i in range(len(data) - 1) if data[i] == 0x5C]
    if not escapes:
        return data[:-1]
    at = rng.choice(escapes)
    return data[:at + rng.randint(1, 3)]


def truncate_then_append(data: bytes, rng: random.Random) -> bytes:
    """A crash mid-write, then a later append: a torn record glued to a whole one."""
    lines, index = _pick_line(data, rng)
    line = lines[index]
    lines[index] = line[:rng.randrange(1, max(2, len(line)))] + lines[-2 if len(lines) > 1 else 0]
    return b"\n".join(lines)


def nul_run(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    run = b"\x00" * rng.choice([1, 7, 512, 4096])
    if rng.random() < 0.5:
        return data[:at] + run + data[at:]
    return data[:at] + run + data[at + len(run):]  # overwrite, like a crashed page


def glue_lines(data: bytes, rng: random.Random) -> bytes:
    cuts = [i for i, b in enumerate(data[:-1]) if b == 0x0A]
    if not cuts:
        return data + data
    at = rng.choice(cuts)
    return data[:at] + data[at + 1:]


def duplicate_line(data: bytes, rng: random.Random) -> bytes:
    lines, index = _pick_line(data, rng)
    lines.insert(rng.randrange(len(lines) + 1), lines[index])
    return b"\n".join(lines)


def drop_line(data: bytes, rng: random.Random) -> bytes:
    lines, index = _pick_line(data, rng)
    del lines[index]
    return b"\n".join(lines)


def swap_lines(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


_JSON_VALUES: list[object] = [None, True, False, 0, -1, 1.5, 1e308, 2**70, "", "x", "e1", [], [1, "a"], {},
                              {"role": ["user"]}, {"type": {}}, {"content": None}]


_field_paths = field_paths


# Fields some rule reads: chosen half of the time, so each is hit often.
_RULE_FIELDS = {"type", "id", "parentId", "timestamp", "message", "role", "content", "arguments", "stopReason",
                "toolCallId", "targetId", "firstKeptEntryId", "details", "strategy", "replacement", "summary",
                "summarizedThroughId", "fromId", "excludeFromContext", "label", "name", "version", "customType",
                "systemMessage", "text", "thinkingLevel", "provider", "modelId", "contextWindow"}


def _replace_field(data: bytes, rng: random.Random, make: Callable[[random.Random], object]) -> bytes:
    """Replace one field (at any depth) of one record by ``make(rng)``."""
    lines, index = _pick_line(data, rng)
    try:
        record = json.loads(lines[index])
    except ValueError:
        return data
    paths = _field_paths(record)
    if not paths:
        return data
    preferred = [p for p in paths if p[-1] in _RULE_FIELDS]
    path = rng.choice(preferred if preferred and rng.random() < 0.5 else paths)
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = make(rng)
    lines[index] = jsonio.dumps(record) if rng.random() < 0.9 else json.dumps(record).encode()
    return b"\n".join(lines)


def wrong_type(data: bytes, rng: random.Random) -> bytes:
    return _replace_field(data, rng, lambda r: r.choice(_JSON_VALUES))


def _nested(levels: int) -> object:
    value: object = "leaf"
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def deep_nesting(data: bytes, rng: random.Random) -> bytes:
    levels = rng.choice([100, 254, 256, 300, 505, 509, 510, 511, 512, 600, 1023, 1100, 3000])
    lines, index = _pick_line(data, rng)
    # Spliced as text: the writer's own limits must not decide what the file holds.
    nested = b"[" * levels + b"0" + b"]" * levels
    if rng.random() < 0.3:
        nested = nested[:len(nested) - rng.randrange(1, levels)]  # unterminated too
    line = lines[index]
    at = line.rfind(b"}")
    if at <= 0:
        return data
    lines[index] = line[:at] + b',"deep":' + nested + line[at:]
    return b"\n".join(lines)


def huge_string(data: bytes, rng: random.Random) -> bytes:
    size = rng.choice([70_000, 400_000])
    return _replace_field(data, rng, lambda r: r.choice("ab\u00e9\"\\\n") * size)


def invalid_utf8(data: bytes, rng: random.Random) -> bytes:
    bad = rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80"])
    quotes = [i for i, b in enumerate(data) if b == 0x22]
    at = rng.choice(quotes) + 1 if quotes and rng.random() < 0.8 else rng.randrange(len(data) + 1)
    return data[:at] + bad + data[at:]


def lone_surrogate(data: bytes, rng: random.Random) -> bytes:
    escape = rng.choice([b"\\ud800", b"\\udfff", b"\\ud83d", b"\\uDC00x"])
    quotes = [i for i, b in enumerate(data) if b == 0x22]
    if not quotes:
        return data
    at = rng.choice(quotes) + 1  # inside a string or a key, at its start or end
    return data[:at] + escape + data[at:]


#: Timestamps no date can hold, or none at all: past 9999-12-31 and before 0001-01-01 (as
#: numbers, and as ISO strings whose offset carries them over), huge, non-finite-looking, text.
BAD_TIMESTAMPS: list[object] = [1e15, -1e15, 1e300, -1e300, 10**30, 2**63, 253402300800000, -62135596800001,
                                "9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00",
                                "+275760-09-13T00:00:00Z", "10000-01-01T00:00:00Z", "0000-01-01T00:00:00Z",
                                "junk", "", "\ud800", True, None, [], {}]


def _timestamp_paths(record: object) -> list[tuple]:
    """Paths of every ``timestamp``/``createdAt`` field of a record, at any depth."""
    return [path for path in _field_paths(record) if path and path[-1] in ("timestamp", "createdAt")]


def bad_timestamp(data: bytes, rng: random.Random) -> bytes:
    """Timestamps out of range in the header, entries and messages (one to all records)."""
    lines = _lines(data)
    every = rng.random() < 0.3
    for index in range(len(lines)) if every else [_pick_line(data, rng)[1]]:
        try:
            record = json.loads(lines[index].removeprefix(b"\xef\xbb\xbf"))
            paths = _timestamp_paths(record)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict) or not paths:
            continue
        for path in paths if every else [rng.choice(paths)]:
            target = record
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = rng.choice(BAD_TIMESTAMPS)
        try:
            lines[index] = jsonio.dumps(record)
        except ValueError:  # deeper than a writer writes: leave the line
            continue
    return b"\n".join(lines)


_SURROGATES = ["\ud800", "\udfff", "\ud83d", "\udc00"]


def _with_surrogates(value: object, rng: random.Random, keys: bool, depth: int = 0) -> object:
    if depth > 64:  # a deep_nesting input: the strings near the top are enough
        return value
    if isinstance(value, str):
        at = rng.randrange(len(value) + 1)
        return value[:at] + rng.choice(_SURROGATES) + value[at:]
    if isinstance(value, list):
        return [_with_surrogates(item, rng, keys, depth + 1) for item in value]
    if isinstance(value, dict):
        return {(_with_surrogates(k, rng, keys, depth + 1) if keys else k): _with_surrogates(v, rng, keys, depth + 1)
                for k, v in value.items()}
    return value


def surrogates_everywhere(data: bytes, rng: random.Random) -> bytes:
    """A lone surrogate in every string of one record, or of every record (keys too, sometimes)."""
    lines = _lines(data)
    every = rng.random() < 0.5
    keys = rng.random() < 0.2
    for index in range(len(lines)) if every else [_pick_line(data, rng)[1]]:
        try:
            record = json.loads(lines[index].removeprefix(b"\xef\xbb\xbf"))
        except (ValueError, RecursionError):
            continue
        try:
            lines[index] = jsonio.dumps(_with_surrogates(record, rng, keys))
        except ValueError:  # deeper than a writer writes: leave the line
            continue
    return b"\n".join(lines)


def bom(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.6:
        return b"\xef\xbb\xbf" * rng.randint(1, 2) + data
    lines, index = _pick_line(data, rng)
    lines[index] = b"\xef\xbb\xbf" + lines[index]
    return b"\n".join(lines)


def crlf(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return data.replace(b"\n", b"\r\n")
    lines = _lines(data)
    return b"\n".join(line + b"\r" * rng.randint(0, 2) for line in lines)


def header_mutation(data: bytes, rng: random.Random) -> bytes:
    """The header's fields: versions (4.0, "4", 5, -1), odd ids, wrong types."""
    lines = _lines(data)
    try:
        header = json.loads(lines[0].removeprefix(b"\xef\xbb\xbf"))
    except ValueError:
        return data
    if not isinstance(header, dict):
        return data
    key = rng.choice(["version", "id", "cwd", "createdAt", "timestamp", "parentSession", "parentSessionId", "type"])
    header[key] = rng.choice([4.0, 3.0, 1, 2, 3, 5, -1, "4", None, True, "../../etc/x", "", "a b", "\ud800", [],
                              {}, "x" * 300, "ok-id"])
    lines[0] = jsonio.dumps(header)
    return b"\n".join(lines)


def stack(data: bytes, rng: random.Random) -> bytes:
    """Two or three mutations in a row."""
    for _ in range(rng.randint(2, 3)):
        _, mutate = rng.choice(SINGLE)
        data = mutate(data, rng)
    return data


SINGLE: list[tuple[str, Callable[[bytes, random.Random], bytes]]] = [
    (f.__name__, f) for f in (
        byte_flip, truncate_inside_line, truncate_at_newline, truncate_inside_utf8, truncate_inside_escape,
        truncate_then_append, nul_run, glue_lines, duplicate_line, drop_line, swap_lines, wrong_type,
        deep_nesting, huge_string, invalid_utf8, lone_surrogate, bom, crlf, header_mutation, bad_timestamp,
        surrogates_everywhere,
    )
]
MUTATIONS = [*SINGLE, ("stack", stack)]


# --------------------------------------------------------------------------
# The paths under test


def _exercise(data: bytes, tmp_path: Path, sqlite: SqliteStore, cli_too: bool) -> None:
    """Run every path on ``data``; raise whatever escapes that is not ours."""
    # A <timestamp>_<id> name, so check compares it with the header id too (D-7).
    name = str(tmp_path / "2026-02-01T09-00-00-000Z_fuzz.jsonl")
    problems = check_bytes(data, name)
    repaired = repair_bytes(data, name)
    assert repaired.remaining == check_bytes(repaired.data, name)
    Path(name).write_bytes(data)
    # check and import agree: import refuses the file exactly when check finds
    # a problem whose code the table marks as refused by import.
    refusing = sorted({p.code for p in problems if not CODES[p.code].import_accepts})
    for target in (MemoryStore(), sqlite):
        try:
            parsed = read_file(name)[0]  # what `sessiontree import` and sync read with
            manager = SessionManager.import_session(parsed, None, target)
        except ALLOWED as exc:
            if not refusing:
                raise AssertionError(f"import refused a file check finds importable: {exc}") from exc
            continue
        if refusing:
            raise AssertionError(f"import accepted a file with {refusing}")
        manager.build_session_context()
        manager.get_tree()
        _across_sessions(target, parsed.header["id"])
        if target is sqlite:
            sqlite.delete(parsed.header["id"])
    if cli_too:
        runner = CliRunner()
        db = str(tmp_path / "cli.db")
        for args in (["check", name], ["check", "--json", name], ["--store", db, "import", name],
                     ["--store", db, "list"], ["--store", db, "list", "--json"], ["--store", db, "stats"],
                     ["--store", db, "stats", "--by", "session"], ["--store", db, "search", "a"],
                     ["--store", db, "check", "--store"]):
            result = runner.invoke(cli, args)
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                raise result.exception
            assert result.exit_code in (0, 1), (args, result.output)
        _viewer_list(db)


#: A session every store holds beside the fuzzed one: whatever the fuzzed one holds, it is
#: still listed, searched and counted (a bad session affects only itself).
_GOOD_ID = "fuzz-good-neighbour"
_GOOD = [{"type": "session", "version": 4, "id": _GOOD_ID, "createdAt": "2026-02-01T09:00:00.000Z", "cwd": "/w"},
         {"type": "message", "id": "g1", "parentId": None, "timestamp": "2026-02-01T09:00:01.000Z",
          "message": {"role": "user", "content": "neighbour text", "timestamp": 1769936401000}}]


def _across_sessions(store: object, session_id: object) -> None:
    """Listing, search, usage and verify over ``store`` holding the fuzzed session and a good one."""
    from sessiontree.search.query import search
    from sessiontree.usage.report import usage_report

    if _GOOD_ID not in store.session_ids():  # type: ignore[attr-defined]
        store.create(_GOOD[0], _GOOD[1:])  # type: ignore[attr-defined]
    listed = {info.id: info for info in SessionManager.list_all(store, include_internal=True)}  # type: ignore[arg-type]
    assert _GOOD_ID in listed and session_id in listed
    for info in listed.values():
        info.to_dict()
    assert any(hit.session_id == _GOOD_ID for hit in search(store, "neighbour").hits)  # type: ignore[arg-type]
    search(store, "a", since="2020-01-01")  # type: ignore[arg-type]
    for by in ("day", "month", "session"):
        usage_report(store, by=by, cost="recorded", tz="UTC")  # type: ignore[arg-type]
    for problem in store.verify():  # type: ignore[attr-defined]
        problem.to_dict()


def _viewer_list(db: str) -> None:
    """The viewer's list page over the CLI's store: never a 500."""
    from starlette.testclient import TestClient

    from sessiontree.web.app import create_app

    with SqliteStore(db) as store:
        response = TestClient(create_app(store), base_url="http://127.0.0.1:8000").get("/")
        assert response.status_code == 200, response.text[:200]


def _run_corpus(count: int, tmp_path: Path) -> dict[str, int]:
    """Run ``count`` seeded mutations; return inputs tried per mutation."""
    bases = _bases()
    sqlite = SqliteStore(tmp_path / "fuzz.db", synchronous="normal")
    tried: dict[str, int] = {}
    for index in range(count):
        rng = random.Random(f"{SEED}:{index}")
        base_name, base = bases[index % len(bases)]
        mutation, mutate = MUTATIONS[(index // len(bases)) % len(MUTATIONS)] if index < len(bases) * len(
            MUTATIONS) else rng.choice(MUTATIONS)
        data = mutate(base, rng)
        tried[mutation] = tried.get(mutation, 0) + 1
        try:
            _exercise(data, tmp_path, sqlite, cli_too=index % 25 == 0)
        except ALLOWED:
            pass
        except BaseException as exc:  # any other escape is the defect
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise AssertionError(
                f"fuzz input crashed: mutation={mutation} base={base_name} seed={SEED} index={index} "
                f"(reproduce: SESSIONTREE_FUZZ_SEED={SEED}, input #{index}); {type(exc).__name__}: {exc}; "
                f"first bytes {data[:160]!r}") from exc
    return tried


def test_mutation_corpus_default(tmp_path: Path) -> None:
    tried = _run_corpus(DEFAULT_N, tmp_path)
    assert sum(tried.values()) == DEFAULT_N
    assert set(tried) == {name for name, _ in MUTATIONS}  # every mutation ran


@pytest.mark.slow
@long_run
def test_mutation_corpus_long(tmp_path: Path) -> None:
    tried = _run_corpus(SLOW_N, tmp_path)
    print(f"fuzz: {SLOW_N} inputs, seed {SEED}: {dict(sorted(tried.items()))}")
    assert sum(tried.values()) == SLOW_N


# --------------------------------------------------------------------------
# Hypothesis: sessions built from arbitrary JSON in arbitrary fields

# Strings: any text, or text around a lone surrogate (JSON allows them; UTF-8 cannot hold them).
_text = st.text(max_size=8) | st.builds(lambda a, s, b: a + s + b, st.text(max_size=3), st.sampled_from(_SURROGATES),
                                        st.text(max_size=3))
# Timestamps: a valid one, text, or one no date can hold (BAD_TIMESTAMPS), as numbers and strings.
_stamps = st.sampled_from(["2026-01-01T00:00:00.000Z", "x"]) | st.sampled_from(BAD_TIMESTAMPS) | st.integers()
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "role", "id", "content", "text", "arguments", "name", "x"]) | _text,
        children, max_size=4),
    max_leaves=5,
)
_kinds = st.sampled_from(["message", "compaction", "label", "context_edit", "branch_summary", "custom_message",
                          "session_summary", "model_change", "thinking_level_change", "session", "odd"])
_roles = st.sampled_from(["user", "assistant", "toolResult", "system", "custom", "bashExecution",
                          "compactionSummary", "hookMessage"]) | _json
_ids = st.sampled_from(["e1", "e2", "e3", "c1"]) | _json


@st.composite
def _entry(draw: st.DrawFn) -> dict:
    entry = {"type": draw(_kinds), "id": draw(_ids), "parentId": draw(st.none() | _ids),
             "timestamp": draw(_stamps | _json)}
    if entry["type"] == "message":
        entry["message"] = {"role": draw(_roles), "content": draw(_json),
                            "stopReason": draw(st.sampled_from(["toolUse", "stop"]) | _json),
                            "toolCallId": draw(_ids), "timestamp": draw(_stamps)}
        if draw(st.booleans()):  # a billed turn: the usage report reads its time
            entry["message"].update(usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                           "totalTokens": 2, "cost": {"total": 0.001}},
                                    provider=draw(st.sampled_from(["p"]) | _text), model=draw(st.sampled_from(["m"]) | _text))
    for key in draw(st.lists(st.sampled_from(["targetId", "firstKeptEntryId", "summary", "details", "replacement",
                                              "fromId", "summarizedThroughId", "content", "label"]), max_size=3)):
        entry[key] = draw(_ids if key.endswith("Id") else _json)
    if draw(st.booleans()):
        entry["details"] = {"strategy": draw(st.sampled_from(["verbatim-lines", "x"]) | _json)}
    return entry


@st.composite
def _session(draw: st.DrawFn) -> bytes:
    header = {"type": "session", "version": draw(st.sampled_from([1, 2, 3, 4, 4.0]) | _json),
              "id": draw(st.sampled_from(["s1", "../x"]) | _json), "cwd": draw(st.sampled_from(["/w"]) | _text),
              "createdAt": draw(_stamps)}
    records = [header, *draw(st.lists(_entry(), max_size=6))]
    lines = [jsonio.dumps(r) for r in records]
    lines += draw(st.lists(st.binary(max_size=20), max_size=2))
    if draw(st.booleans()):
        draw(st.randoms()).shuffle(lines)
    return draw(st.sampled_from([b"\n", b"\r\n"])).join(lines) + draw(st.sampled_from([b"\n", b""]))


_HYPOTHESIS_STORES: dict[Path, SqliteStore] = {}


def _hypothesis_case(data: bytes, tmp_path: Path) -> None:
    # One store per test (tmp_path is shared by its examples): opening one per example is slow.
    store = _HYPOTHESIS_STORES.setdefault(tmp_path, SqliteStore(tmp_path / "hyp.db", synchronous="normal"))
    try:
        _exercise(data, tmp_path, store, cli_too=False)
    except ALLOWED:
        pass


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=_session())
def test_hypothesis_sessions_default(tmp_path: Path, data: bytes) -> None:
    _hypothesis_case(data, tmp_path)


@pytest.mark.slow
@long_run
@settings(max_examples=int(os.environ.get("SESSIONTREE_FUZZ_HYPOTHESIS_N", "2000")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=_session())
def test_hypothesis_sessions_long(tmp_path: Path, data: bytes) -> None:
    _hypothesis_case(data, tmp_path)
