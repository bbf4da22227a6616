"""Each entry rule runs once on import: the reader's check vouches for the entries it
checked as they are, and a store's ``create`` checks the rest (docs/stores.md, "Import")."""

from __future__ import annotations

import pytest

from builders import header, user_entry
from sessiontree.errors import InvalidSessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import CheckedTexts, ParsedSession, parse_session
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.stores.storable import encode_entries


def _file(*records: dict) -> bytes:
    return b"".join(jsonio.dumps(record) + b"\n" for record in records)


def test_format_4_file_vouches_for_every_entry() -> None:
    parsed = parse_session(_file(header("s1"), user_entry("a", None, "hi"), user_entry("b", "a", "yo")))
    assert parsed.unchecked == frozenset()
    texts = parsed.checked_texts()
    assert isinstance(texts, CheckedTexts)
    assert texts.entries is parsed.entries
    assert list(texts) == parsed.raw


def test_upgrade_changed_entries_stay_unchecked() -> None:
    # Format 3 -> 4 leaves entries alone; format 2 -> 3 renames the hookMessage role
    # (docs/rules/versions.md C.5): entry 1 changed after the reader's check.
    hook = {"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-02-01T09:00:00.000Z",
            "message": {"role": "hookMessage", "content": "x"}}
    parsed = parse_session(_file({"type": "session", "version": 2, "id": "s2", "timestamp": "t", "cwd": "/w"},
                                 user_entry("a", None, "hi"), hook))
    assert parsed.unchecked == frozenset({1})
    assert parsed.checked_texts().unchecked == frozenset({1})


def test_format_1_entries_are_checked_after_their_upgrade() -> None:
    data = b'{"type":"session","id":"s3","timestamp":"t","cwd":"/w"}\n' \
           b'{"type":"message","timestamp":"2026-02-01T09:00:00.000Z","message":{"role":"user","content":"hi"}}\n'
    assert parse_session(data).unchecked == frozenset()


def test_sessions_not_read_by_the_parser_vouch_for_nothing() -> None:
    entries = [user_entry("a", None, "hi")]
    parsed = ParsedSession(header("s4"), entries, [None], jsonio.dumps(header("s4")), 4)
    texts = parsed.checked_texts()
    assert type(texts) is list
    assert texts == [jsonio.dumps(entries[0])]


def _bad() -> dict:
    entry = user_entry("a", None, "hi")
    del entry["timestamp"]  # docs/rules/format.md D.19: timestamp must be a string
    return entry


def test_the_store_checks_entries_the_vouch_does_not_cover() -> None:
    bad = [_bad()]
    text = [b'{"type":"message"}']
    # Vouching for another list: checked.
    with pytest.raises(InvalidSessionError, match="timestamp"):
        encode_entries(bad, CheckedTexts(text, [_bad()], frozenset()))
    # The very list, but the entry is unchecked (an upgrade changed it): checked.
    with pytest.raises(InvalidSessionError, match="timestamp"):
        encode_entries(bad, CheckedTexts(text, bad, frozenset({0})))
    # A plain list: checked.
    with pytest.raises(InvalidSessionError, match="timestamp"):
        encode_entries(bad, list(text))
    # Vouched: the reader's check was the one check; the text is taken as it is.
    assert encode_entries(bad, CheckedTexts(text, bad, frozenset())) == text


def test_duplicate_ids_are_refused_even_when_vouched() -> None:
    entries = [user_entry("a", None, "hi"), user_entry("a", None, "yo")]
    texts = [jsonio.dumps(entry) for entry in entries]
    with pytest.raises(InvalidSessionError, match='duplicate entry id "a"'):
        encode_entries(entries, CheckedTexts(texts, entries, frozenset()))


@pytest.mark.parametrize("make", [MemoryStore, "sqlite"])
def test_a_parsed_file_imports_byte_for_byte(make: object, tmp_path) -> None:
    store = SqliteStore(str(tmp_path / "s.db")) if make == "sqlite" else MemoryStore()
    data = _file(header("s5"), user_entry("a", None, "hi"), user_entry("b", "a", "yo"))
    # Stored text kept as read: spacing the serialiser would never write.
    data = data.replace(b'"content":"hi"', b'"content" : "hi"')
    parsed = parse_session(data)
    store.create(parsed.header, parsed.entries, parsed.checked_texts())
    assert store.load("s5").to_bytes() == data


def test_import_pauses_the_collector_only_while_reading_and_writing(tmp_path) -> None:
    import gc

    from sessiontree.session.importing import import_files

    seen: list[bool] = []

    class Watching(MemoryStore):
        def create(self, *args: object, **kwargs: object) -> None:
            seen.append(gc.isenabled())
            super().create(*args, **kwargs)  # type: ignore[arg-type]

    paths = []
    for name in ("s6", "s7"):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(_file(header(name), user_entry("a", None, "hi")))
        paths.append(str(path))
    assert gc.isenabled()
    during: list[bool] = []
    outcomes = []
    for outcome in import_files(paths, Watching()):
        during.append(gc.isenabled())  # the caller's code runs with the collector on
        outcomes.append(outcome)
    assert [outcome.error for outcome in outcomes] == [None, None]
    assert seen == [False, False]
    assert during == [True, True]
    assert gc.isenabled()
    # Files read with every entry vouched for: what the store was handed.
    assert all(outcome.parsed is not None and outcome.parsed.unchecked == frozenset() for outcome in outcomes)
