"""Every JSONL line sessiontree writes is what JavaScript's ``JSON.stringify``
writes (rules in docs/format-bytes.md, docs/rules/format.md §2.6 items 2-4).

Three kinds of evidence:

* Python-only: :func:`jsonio.dumps` (orjson plus fix-ups) gives the same bytes
  as :func:`jsonio.js_stringify` (the exact, slow serialiser) for generated
  values, and every write path (JSONL appends, SQLite export, format-1 upgrade,
  ``check --repair``) keeps number text such as ``0.000009`` as JavaScript
  wrote it.
* Node (skipped when ``node`` is not on PATH): for the lines written from the
  corpus, the examples and a Hypothesis generator,
  ``JSON.stringify(JSON.parse(line)) === line``. One node process per test
  reads all lines on stdin (tests/node/roundtrip.mjs).
* The original agent (skipped unless its npm package is already installed in
  ``benchmarks/.work/reference/<version>/``, which ``benchmarks/reference.py``
  or a benchmark run does; tests never download it): its own upgrade of the
  format-1 corpus equals ours byte for byte apart from the ids it invents and
  the header, whose format-4 form differs on purpose.

Two inputs are deliberately not round-trip-stable: lines kept verbatim from a
file (a stored ``12345678901234567890`` stays as it was; JavaScript would print
``12345678901234567000``), and nothing else. Newly serialised big integers are
written as ``JSON.stringify(JSON.parse(text))`` gives them.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from sessiontree.check.checker import repair_bytes
from sessiontree.format import jsonio
from sessiontree.format.codec import parse_session, read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.sqlite.store import SqliteStore

ROOT = Path(__file__).resolve().parents[1]
PI_V1 = corpus.shared("pi-v1")
EXAMPLES = ROOT / "examples"
NODE_DIR = Path(__file__).resolve().parent / "node"
NODE = shutil.which("node")
PACKAGE_MODULE = Path("node_modules", "@earendil-works", "pi-coding-agent", "dist", "core", "session-manager.js")

needs_node = pytest.mark.skipif(NODE is None, reason="node is not on PATH: the JSON.stringify round trip needs Node.js")
needs_corpus = corpus.needs_shared


def corpus_files() -> list[Path]:
    return sorted(PI_V1.glob("*.jsonl")) if PI_V1.is_dir() else []


def node_roundtrip(lines: list[bytes]) -> dict[str, Any]:
    """Run tests/node/roundtrip.mjs once over ``lines``; its report."""
    assert all(b"\n" not in line for line in lines)
    done = subprocess.run([NODE, str(NODE_DIR / "roundtrip.mjs")], input=b"".join(line + b"\n" for line in lines),
                          capture_output=True, check=True, timeout=300)
    report = json.loads(done.stdout)
    assert report["checked"] == len(lines)
    return report


def assert_stringify_stable(lines: list[bytes]) -> None:
    report = node_roundtrip(lines)
    shown = "\n".join(f"line {m['line']}:\n  ours: {m['got'][:300]}\n  JS:   {m['want'][:300]}"
                      for m in report["mismatches"][:5])
    assert report["count"] == 0, f"{report['count']} of {report['checked']} lines differ from JSON.stringify:\n{shown}"


# --------------------------------------------------------------------------- generated values

_SPECIAL_CHARS = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "\u2028", "\u2029", "\x00", "\x08",
                  "\x0b", "\x1f", "\x7f", "\t", "\n", "\r", '"', "\\", "/", "é", "\U0001f600", "\ufeff", "\uffff"]
# Texts that look like the number tokens and keys dumps rewrites, to be left alone inside strings.
_DECOYS = [':1.0,', ',9e-6]', '[1e+16}', ':-0.0}', ',12345678901234567890]', '{"1":', ',"2":1', '\\"', '\\\\"',
           '":1.0,"', '"x":1e+21}']
_FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 1e21, -1e21, math.nextafter(1e21, 0), math.nextafter(1e21, math.inf),
                1e-7, -1e-7, math.nextafter(1e-7, 0), math.nextafter(1e-7, 1), 1e-6, 9e-6, 5e-6, 1e-5, 1e16,
                1e15, 1e20, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 2.0**53, 2.0**53 + 2,
                0.1, 0.30000000000000004, 123456789012345680000.0, float("nan"), float("inf"), -float("inf")]
_INT_EDGES = [0, -1, 2**53 - 1, 2**53, 2**53 + 1, -(2**53 + 1), 2**63 - 1, -(2**63), 2**64 - 1, 2**64,
              12345678901234567890, 10**21, 10**21 - 1, 10**308, 10**400, -(10**400)]
_KEY_EDGES = ["0", "1", "2", "9", "10", "01", "00", "-1", "-0", "1.5", "1e3", " 1", "4294967294", "4294967295",
              "4294967296", "9007199254740993", "", "__proto__", "length", "\ud800", "\u2028"]

json_text = st.lists(st.one_of(st.characters(), st.sampled_from(_SPECIAL_CHARS), st.sampled_from(_DECOYS)),
                     max_size=12).map("".join)
json_floats = st.one_of(st.floats(), st.sampled_from(_FLOAT_EDGES),
                        st.integers(-330, 308).map(lambda e: 10.0**e if e > -324 else 5e-324),
                        st.floats(min_value=-1e-300, max_value=1e-300),  # subnormals and tiny normals
                        st.floats(min_value=1e20, max_value=1e22), st.floats(min_value=1e-8, max_value=1e-6))
json_ints = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from(_INT_EDGES), st.integers(-1000, 1000))
json_keys = st.one_of(json_text, st.sampled_from(_KEY_EDGES), st.integers(0, 2**33).map(str))
json_scalars = st.one_of(st.none(), st.booleans(), json_ints, json_floats, json_text)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                                 st.dictionaries(json_keys, inner, max_size=6)),
                           max_leaves=20)


# Examples per run; raise it for a longer search (e.g. SESSIONTREE_JSON_EXAMPLES=5000).
EXAMPLES_PER_RUN = int(os.environ.get("SESSIONTREE_JSON_EXAMPLES", "150"))


def test_generated_values_are_what_json_stringify_writes() -> None:
    """Python-side properties on every generated value, then (with node) one
    round trip of all the lines through ``JSON.stringify(JSON.parse(line))``."""
    lines: list[tuple[bytes, Any]] = []

    @settings(max_examples=EXAMPLES_PER_RUN, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(json_values, min_size=1, max_size=3))
    def collect(values: list[Any]) -> None:
        for value in values:
            line = jsonio.dumps(value)
            # The fast path (orjson + fix-ups) and the exact serialiser agree byte for byte.
            assert line == jsonio.js_stringify(value).encode("utf-8")
            # Written once, the text is stable: reading and writing it again changes nothing.
            assert jsonio.dumps(jsonio.loads(line)) == line
            lines.append((line, value))

    collect()
    if NODE is None:
        pytest.skip("node is not on PATH: the Python-side properties passed; the JSON.stringify round trip needs Node.js")
    report = node_roundtrip([line for line, _ in lines])
    details = "\n".join(f"value {lines[m['line']][1]!r}\n  ours: {m['got'][:300]}\n  JS:   {m['want'][:300]}"
                        for m in report["mismatches"][:5])
    assert report["count"] == 0, f"{report['count']} of {report['checked']} differ:\n{details}"


@needs_node
def test_edge_values_are_what_json_stringify_writes() -> None:
    values: list[Any] = [*_FLOAT_EDGES, *_INT_EDGES, *(-x for x in _FLOAT_EDGES), *_SPECIAL_CHARS, *_DECOYS,
                         {key: i for i, key in enumerate(reversed(_KEY_EDGES))},
                         [{"b": 1, "2": 2, "1": 3, "f": 1.0, "g": 1e21, "h": 1e-7}],
                         "\ud83d\ude00", "a\ud83d", "\ude00b", "\\\ud800", {"\ud800": "\udfff"}]
    values += [10.0**e for e in range(-330, 309)] + [-(1.5 * 10.0**e) for e in range(-320, 300)]
    values += [float(2**k) for k in range(-1074, 1024, 7)]
    assert_stringify_stable([jsonio.dumps(v) for v in values])


# --------------------------------------------------------------------------- exact expected bytes (no node)


@pytest.mark.parametrize(("value", "expected"), [
    ({"cost": {"input": 9e-6, "output": 5e-6, "total": 1e16}}, b'{"cost":{"input":0.000009,"output":0.000005,"total":10000000000000000}}'),
    ([1.0, -0.0, 1e21, 1e-7, 1.5e-7, 9.99e-7, 1e20, 5e-324], b'[1,0,1e+21,1e-7,1.5e-7,9.99e-7,100000000000000000000,5e-324]'),
    (1.0, b"1"), (-0.0, b"0"), (1e16, b"10000000000000000"), (12345678901234567890, b"12345678901234567000"),
    ([2**53 + 1, 2**63 - 1, 2**64, 10**21, 10**400], b"[9007199254740992,9223372036854776000,18446744073709552000,1e+21,null]"),
    ({"b": 1, "2": {"y": 1.0, "10": 2, "9": 3}, "1": 0, "01": 4, "4294967295": 5, "4294967294": 6, "-1": 7},
     b'{"1":0,"2":{"9":3,"10":2,"y":1},"4294967294":6,"b":1,"01":4,"4294967295":5,"-1":7}'),
    ({"s": "\ud800 \ud83d\ude00 \u2028\u2029 \x00\x1f\x7f\b\f\n\r\t\"\\ é"},
     '{"s":"\\ud800 \U0001f600 \u2028\u2029 \\u0000\\u001f\x7f\\b\\f\\n\\r\\t\\"\\\\ é"}'.encode("utf-8")),
    # number-like text inside strings is left alone, also right after escaped quotes and backslashes
    ({"t": 'a":1.0,"b\\', "u": '\\":9e-6]', "n": 9e-6, "k": ['{"1":1.0}', 1.0]},
     b'{"t":"a\\":1.0,\\"b\\\\","u":"\\\\\\":9e-6]","n":0.000009,"k":["{\\"1\\":1.0}",1]}'),
    ({1: 1.0, "a": 2}, b'{"1":1,"a":2}'),
])
def test_dumps_exact_bytes(value: Any, expected: bytes) -> None:
    assert jsonio.dumps(value) == expected
    assert jsonio.js_stringify(value).encode("utf-8") == expected


def test_dumps_deep_nesting_beyond_orjson_limit() -> None:
    # 250 x {"a": [..]} is 500 levels: past orjson's 255, within MAX_DEPTH (512).
    value: Any = 1.0
    for _ in range(250):
        value = {"a": [value]}
    assert jsonio.dumps(value) == b'{"a":[' * 250 + b"1" + b"]}" * 250
    # 257 pairs (514 levels) is past the one nesting limit: refused, not a RecursionError.
    for _ in range(7):
        value = {"a": [value]}
    with pytest.raises(jsonio.NestingError):
        jsonio.dumps(value)


# --------------------------------------------------------------------------- write paths


def _tricky_message(i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": f"cut \ud83d {i} \u2028 x:1.0,"},
                                              {"type": "toolCall", "id": f"c{i}", "name": "edit",
                                               "arguments": {"b": 1, "2": 2.0, "1": 3, "big": 12345678901234567890}}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "m", "stopReason": "stop",
            "usage": {"input": 3, "output": 191, "cacheRead": 0, "cacheWrite": 1684, "totalTokens": 1878,
                      "cost": {"input": 9e-6, "output": 0.002865, "cacheRead": 0.0, "cacheWrite": 1e-7,
                               "total": 1e21}},
            "timestamp": 1763681000000 + i}


_EXPECTED_TAIL = ('"arguments":{"1":3,"2":2,"b":1,"big":12345678901234567000}}],"api":"anthropic-messages",'
                  '"provider":"anthropic","model":"m","stopReason":"stop","usage":{"input":3,"output":191,'
                  '"cacheRead":0,"cacheWrite":1684,"totalTokens":1878,"cost":{"input":0.000009,"output":0.002865,'
                  '"cacheRead":0,"cacheWrite":1e-7,"total":1e+21}}')


def _check_written(lines: list[bytes]) -> None:
    messages = [line for line in lines if b'"type":"message"' in line]
    assert messages
    for line in messages:
        assert _EXPECTED_TAIL.encode() in line
        assert b"cut \\ud83d" in line and "\u2028".encode() in line
    if NODE is not None:
        assert_stringify_stable(lines)


def test_jsonl_appends_write_javascript_bytes(tmp_path: Path) -> None:
    manager = SessionManager.create("/work", store=JsonlStore(tmp_path, fsync=False))
    for i in range(3):
        manager.append_message(_tricky_message(i))
    files = list(tmp_path.glob("*.jsonl"))
    assert len(files) == 1
    _check_written(files[0].read_bytes().splitlines())


def test_sqlite_appends_and_export_write_javascript_bytes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    try:
        manager = SessionManager.create("/work", store=store)
        for i in range(3):
            manager.append_message(_tricky_message(i))
        exported = store.read(manager.get_session_id()).to_bytes()
    finally:
        store.close()
    _check_written(exported.splitlines())


def test_upgrade_keeps_javascript_number_text() -> None:
    v1 = (b'{"type":"session","id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}\n'
          b'{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi",'
          b'"n":[0.000009,1e+21,1e-7,10000000000000000,12345678901234567890],"k":{"1":1,"2":2,"b":3}}}\n')
    parsed = parse_session(v1)
    assert parsed.steps[0] == "v1_to_v2"
    line = parsed.to_bytes().splitlines()[1]
    assert (b'"message":{"role":"user","content":"hi","n":[0.000009,1e+21,1e-7,10000000000000000,'
            b'12345678901234567000],"k":{"1":1,"2":2,"b":3}},"id":') in line


def test_verbatim_lines_keep_their_stored_text() -> None:
    # A format-4 line is kept as stored, even where JavaScript would print a number differently.
    text = (b'{"type":"session","version":4,"id":"s1","createdAt":"2025-01-01T00:00:00.000Z","cwd":"/w"}\n'
            b'{"type":"custom","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
            b'"customType":"x","data":{"n":12345678901234567890,"f":1.0,"e":9e-6}}\n')
    assert parse_session(text).to_bytes() == text


def test_check_repair_rewrites_with_javascript_bytes() -> None:
    header = b'{"type":"session","version":4,"id":"s1","createdAt":"2025-01-01T00:00:00.000Z","cwd":"/w"}'
    body = (b'"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"x:1.0,",'
            b'"n":[0.000009,1e+21,1e-7,10000000000000000],"k":{"1":1,"2":2,"b":3},"s":"\\ud800\xe2\x80\xa8"}}')
    line = b'{"type":"message","id":"a1","parentId":"gone",' + body
    result = repair_bytes(header + b"\n" + line + b"\n", "s.jsonl")
    assert any(change.code == "dangling-parent" for change in result.changes)
    repaired = result.data.splitlines()
    assert repaired[1] == b'{"type":"message","id":"a1","parentId":null,' + body
    if NODE is not None:
        assert_stringify_stable(repaired)


# --------------------------------------------------------------------------- corpus


@needs_node
@needs_corpus
def test_corpus_upgrade_and_examples_are_what_json_stringify_writes() -> None:
    lines: list[bytes] = []
    for path in [*corpus_files(), *sorted(EXAMPLES.glob("*.jsonl"))]:
        parsed = read_session_file(path)
        lines += parsed.to_bytes().splitlines()  # as an upgrade or export writes the file
        lines += [jsonio.dumps(parsed.header), *(jsonio.dumps(e) for e in parsed.entries)]  # serialised afresh
    assert len(lines) > 4000
    assert_stringify_stable(lines)


def _reference_module() -> Path | None:
    configured = os.environ.get("SESSIONTREE_REFERENCE_MODULE")
    if configured:
        return Path(configured)
    root = ROOT / "benchmarks" / ".work" / "reference"
    found = sorted(root.glob(f"*/{PACKAGE_MODULE}")) if root.is_dir() else []
    return found[-1] if found else None


def agent_upgrade(files: list[Path]) -> dict[str, bytes]:
    """The original agent's own upgrade of each file (tests/node/agent_upgrade.mjs)."""
    module = _reference_module()
    done = subprocess.run([NODE, str(NODE_DIR / "agent_upgrade.mjs"), str(module), *map(str, files)],
                          capture_output=True, check=True, timeout=300)
    out = {}
    for line in done.stdout.splitlines():
        record = json.loads(line)
        out[record["file"]] = record["text"].encode("utf-8")
    return out


def compare_with_agent(ours: bytes, theirs: bytes) -> list[int]:
    """Entry lines (1-based, header excluded) that differ once the agent's random
    ids are replaced by ours, matched by position."""
    our_lines, their_lines = ours.splitlines(), theirs.splitlines()
    assert len(our_lines) == len(their_lines)
    mapping = {json.loads(t)["id"]: json.loads(o)["id"] for o, t in zip(our_lines[1:], their_lines[1:], strict=False)}
    pattern = re.compile(rb'"(' + b"|".join(re.escape(k.encode()) for k in mapping) + rb')"')
    differ = []
    for number, (o, t) in enumerate(zip(our_lines[1:], their_lines[1:], strict=False), start=1):
        if pattern.sub(lambda m: b'"' + mapping[m.group(1).decode()].encode() + b'"', t) != o:
            differ.append(number)
    return differ


@needs_node
@needs_corpus
@pytest.mark.skipif(_reference_module() is None,
                    reason="the agent's npm package is not installed in benchmarks/.work/reference/ "
                           "(python benchmarks/reference.py or a benchmark run installs it; tests never download)")
def test_corpus_upgrade_equals_the_agents_own_upgrade() -> None:
    files = corpus_files()
    theirs = agent_upgrade(files)
    for path in files:
        ours = read_session_file(path).to_bytes()
        agent = theirs[str(path)]
        assert compare_with_agent(ours, agent) == [], path.name
        # The header differs on purpose: format 4 writes "version":4 second and
        # "createdAt" for the agent's "timestamp" (docs/rules/versions.md C.9); the agent appends
        # "version":3. Everything else in it is the same, in the same order.
        our_header, their_header = json.loads(ours.splitlines()[0]), json.loads(agent.splitlines()[0])
        assert our_header["version"] == 4 and their_header["version"] == 3
        assert [(k, v) for k, v in our_header.items() if k != "version"] == [
            ("createdAt" if k == "timestamp" else k, v) for k, v in their_header.items() if k != "version"]
