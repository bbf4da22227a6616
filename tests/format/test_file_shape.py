"""File shapes (docs/agent-loop.md, "Byte for byte"): the operations worked out by hand
for files that differ from the store's rendering, and the round trip through the
encoding and through the codec on every vendored and example file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sessiontree.errors import SessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import parse_session
from sessiontree.format.shape import FileShape, ShapeError, render_shape, shape_of

HEADER = b'{"type":"session","version":4,"id":"s","createdAt":"T","cwd":"/p"}'
TEXTS = [b'{"a":1}', b'{"b":2}', b'{"c":3}']

ROOT = Path(__file__).resolve().parents[2]


def test_a_file_as_the_store_renders_it_is_one_header_and_one_run():
    data = HEADER + b"\n" + b"".join(t + b"\n" for t in TEXTS)
    shape = shape_of(data, HEADER, [2, 3, 4], TEXTS.__getitem__)
    assert shape.ops == [("h", b"\n"), ("e", 3, b"\n")]
    assert (shape.size, shape.sha256, shape.entries, shape.canonical) == (
        len(data), hashlib.sha256(data).digest(), 3, True)


def test_every_difference_is_kept_line_by_line():
    v3 = b'{"type":"session","version":3,"id":"s","timestamp":"T","cwd":"/p"}'
    data = v3 + b"\r\n" + b'{"a":1}\r\n' + b"\r\n" + b' {"b":2}\n' + b'{"c":3}'
    # Lines: 1 header (another text than the stored one), 2 entry a (CRLF), 3 blank,
    # 4 entry b padded with a space, 5 entry c without a final newline.
    shape = shape_of(data, HEADER, [2, 4, 5], TEXTS.__getitem__)
    assert shape.ops == [("H", v3 + b"\r\n"), ("e", 1, b"\r\n"), ("l", b"\r\n"), ("L", b' {"b":2}\n'),
                         ("e", 1, b"")]
    assert shape.entries == 3 and not shape.canonical
    assert render_shape(shape, HEADER, TEXTS) == data
    assert FileShape.decode(shape.encode()) == shape


def test_appended_bytes_extend_a_shape_and_merge_runs():
    first = HEADER + b"\n" + TEXTS[0] + b"\n"
    shape = shape_of(first, HEADER, [2], TEXTS.__getitem__)
    more = shape_of(b"".join(t + b"\n" for t in TEXTS[1:]), None, [2, 3], lambda i: TEXTS[1 + i], first_line=2)
    assert more.ops == [("e", 2, b"\n")]
    whole = first + TEXTS[1] + b"\n" + TEXTS[2] + b"\n"
    grown = shape.extended(more, hashlib.sha256(whole).digest())
    assert grown.ops == [("h", b"\n"), ("e", 3, b"\n")]
    assert grown.size == len(whole) and render_shape(grown, HEADER, TEXTS) == whole


def test_rendering_refuses_too_few_entries_and_a_missing_header():
    shape = shape_of(HEADER + b"\n" + TEXTS[0] + b"\n", HEADER, [2], TEXTS.__getitem__)
    with pytest.raises(ShapeError, match="needs 1 entries"):
        render_shape(shape, HEADER, [])
    with pytest.raises(ShapeError, match="no header"):
        render_shape(shape, None, TEXTS)


def test_lines_that_do_not_match_the_entries_are_refused():
    data = HEADER + b"\n" + TEXTS[0] + b"\n"
    with pytest.raises(ShapeError):
        shape_of(data, HEADER, [5], TEXTS.__getitem__)


def test_a_glued_line_is_kept_verbatim_and_consumes_its_entries():
    # Line 2 holds entries a and b glued (a lost newline, a space between them); line 3 holds c.
    glued = TEXTS[0] + b" " + TEXTS[1] + b"\n"
    data = HEADER + b"\n" + glued + TEXTS[2] + b"\n"
    shape = shape_of(data, HEADER, [2, 2, 3], TEXTS.__getitem__)
    assert shape.ops == [("h", b"\n"), ("G", glued, 2), ("e", 1, b"\n")]
    assert shape.entries == 3 and not shape.canonical
    assert render_shape(shape, HEADER, TEXTS) == data
    blob = shape.encode()
    # A glued line needs encoding version 2 (a version-1 reader knows no "G")...
    assert jsonio.loads(__import__("zlib").decompress(blob))["v"] == 2
    assert FileShape.decode(blob) == shape
    # ... and a shape without one is still written and read as version 1.
    plain = shape_of(HEADER + b"\n" + TEXTS[0] + b"\n", HEADER, [2], TEXTS.__getitem__)
    assert jsonio.loads(__import__("zlib").decompress(plain.encode()))["v"] == 1
    assert FileShape.decode(plain.encode()) == plain


def test_glued_entries_out_of_order_are_refused():
    data = HEADER + b"\n" + TEXTS[0] + TEXTS[1] + b"\n" + TEXTS[2] + b"\n"
    with pytest.raises(ShapeError, match="not consecutive"):
        shape_of(data, HEADER, [2, 3, 2], TEXTS.__getitem__)


@pytest.mark.parametrize("blob", [b"", b"not zlib", __import__("zlib").compress(b'{"v":9}'),
                                  __import__("zlib").compress(b'{"v":1,"size":0,"sha256":"","ops":[["G","",2]]}')])
def test_a_damaged_encoding_is_a_shape_error(blob):
    with pytest.raises(ShapeError):
        FileShape.decode(blob)


def _files() -> list[Path]:
    shared = ROOT.parent / "shared" / "corpus"
    found = sorted(ROOT.glob("examples/*.jsonl")) + sorted((ROOT / "tests" / "data").rglob("*.jsonl"))
    if shared.is_dir():
        found += sorted(shared.rglob("*.jsonl"))
    readable = []
    for path in found:
        try:
            parse_session(path.read_bytes(), str(path))
        except SessionError:
            continue  # a damaged sample the codec rejects is no session to give back
        readable.append(path)
    return readable


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_every_readable_file_round_trips_through_its_shape(path):
    data = path.read_bytes()
    parsed = parse_session(data, str(path))
    header = jsonio.dumps(parsed.header)
    shape = FileShape.decode(shape_of(data, header, parsed.lines, parsed.entry_bytes).encode())
    texts = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
    assert render_shape(shape, header, texts) == data
    assert shape.sha256 == hashlib.sha256(data).digest()
