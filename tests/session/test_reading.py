"""The read service (issue 40 item 2; docs/decisions/read-service.md): sessions opened
read-only by the strategy the store's traits choose, answers that take the leaf as an
argument, one cache invalidated by the store's change token.

One synthetic branching session, counted by hand: ``r1`` (user) -> ``a1`` (assistant) ->
``a2`` (user) is branch A; ``r1`` -> ``b1`` (assistant) is branch B, written last, so the
loaded leaf is ``b1`` (docs/rules/tree.md F.1). A's projection has 3 messages, B's 2.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from builders import header
from sessiontree.errors import EntryNotFoundError
from sessiontree.session.reading import ReadOnlySessions, open_readonly
from sessiontree.stores import open_store

SID = "019cadb4-6e80-7a3c-9b1d-00000000e001"
#: An Anthropic key's shape (tests/test_secrets.py): 95 characters after the prefix.
KEY = "sk-ant-api03-" + "Zq8rT2mX9vL4kP7wB3nY6cH1fJ5dG0sA" * 2 + "-AA"


def _msg(entry_id: str, parent: str | None, role: str, text: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": text}
    if role == "assistant":
        message = {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": "m",
                   "api": "a", "stopReason": "stop", "timestamp": 2,
                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-03-01T09:00:01.000Z",
            "message": message}


RECORDS = [_msg("r1", None, "user", "start"), _msg("a1", "r1", "assistant", "plan A"),
           _msg("a2", "a1", "user", f"go on with {KEY}"), _msg("b1", "r1", "assistant", "plan B")]


@pytest.fixture(params=["sqlite", "jsonl"])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    where = str(tmp_path / "s.db") if request.param == "sqlite" else f"jsonl:///{tmp_path / 'dir'}"
    writer = open_store(where)
    writer.create(header(SID), RECORDS)
    reader = open_store(where, readonly=True)
    yield request.param, writer, reader
    reader.close()
    writer.close()


def test_answers_take_the_leaf_and_never_move_it(stored: Any) -> None:
    _kind, _writer, store = stored
    session = open_readonly(store, SID)
    assert session.get_leaf_id() == "b1"
    assert [e["id"] for e in session.get_branch("a2")] == ["r1", "a1", "a2"]
    assert len(session.build_session_projection("a2").messages) == 3
    assert len(session.build_session_projection().messages) == 2
    assert [e["id"] for e in session.get_branch()] == ["r1", "b1"]  # still the loaded leaf
    assert session.get_leaf_id() == "b1"
    with pytest.raises(EntryNotFoundError):
        session.get_branch("nope")


def test_the_store_traits_choose_the_read(stored: Any) -> None:
    kind, _writer, store = stored
    outline = open_readonly(store, SID, "outline")
    # Skeletons only where the store reads them cheaply (SQLite); elsewhere one whole read.
    assert outline.partial is (kind == "sqlite")
    assert [e["id"] for e in outline.get_entries()] == ["r1", "a1", "a2", "b1"]
    assert outline.read_entries(["a1"])[0]["message"]["content"][0]["text"] == "plan A"
    assert outline.whole().get_entry("a2")["message"]["content"] == f"go on with {KEY}"
    assert len(outline.build_session_projection("a2").messages) == 3


def test_threads_share_a_session_at_their_own_leaves(stored: Any) -> None:
    _kind, _writer, store = stored
    session = ReadOnlySessions(store, "outline").get(SID)
    wrong: list[tuple[str, int]] = []

    def ask(leaf: str, want: int) -> None:
        for _ in range(50):
            got = len(session.get_branch(leaf))
            if got != want:
                wrong.append((leaf, got))

    threads = [threading.Thread(target=ask, args=(leaf, want)) for leaf, want in
               [("a2", 3), ("b1", 2), ("a1", 2), ("r1", 1)] * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert session.get_leaf_id() == "b1"


def test_one_cache_kept_until_the_change_token_moves(stored: Any) -> None:
    _kind, writer, store = stored
    sessions = ReadOnlySessions(store, "context", min_reread=3600)
    first = sessions.get(SID)
    assert sessions.get(SID) is first
    writer.append(SID, [_msg("b2", "b1", "user", "more")])
    again = sessions.get(SID)
    assert again is not first
    assert [e["id"] for e in again.get_branch()] == ["r1", "b1", "b2"]


def test_a_redacting_service_reads_whole_and_redacts_once(stored: Any) -> None:
    _kind, _writer, store = stored
    session = ReadOnlySessions(store, "outline", redact=True).get(SID)
    assert session.redacted and not session.partial
    text = session.get_entry("a2")["message"]["content"]
    assert KEY not in text and "[REDACTED:anthropic-api-key:1]" in text
    assert session.read_entries(["a2"])[0]["message"]["content"] == text
