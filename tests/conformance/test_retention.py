"""Retention on every store (docs/team.md, "Retention"): ``prune`` deletes whole sessions
last active before a cutoff, with their derived rows (search, usage), spares held ones,
filters by the agent provenance names, and logs ids, counts and sizes, never content.

Synthetic sessions (builders): ages, holds and agents are what is checked, which no real
agent file shows."""

from __future__ import annotations

import json

import pytest

from builders import assistant, chain, header, message_entry, text_block, user_ms
from sessiontree.stores.base import Provenance, Retention

OLD = "2020-03-01T10:00:00.000Z"
OLD_MS = 1583056800000
NEW = "2026-03-01T10:00:00.000Z"
NEW_MS = 1772359200000
CUTOFF_MS = 1735689600000  # 2025-01-01
SECRET = "hunter2-ocelot"


def _fill(store, sid: str, created: str, ts_ms: int) -> None:
    msg = assistant([text_block(f"{SECRET} reply")], ts=ts_ms + 1000)
    store.create(header(sid, created=created), chain(message_entry("u1", user_ms(f"{SECRET} asks", ts_ms)),
                                                     message_entry("a1", msg, "u1")))


@pytest.fixture
def filled(store):
    for sid in ("old-a", "old-held", "old-codex"):
        _fill(store, sid, OLD, OLD_MS)
    _fill(store, "new-a", NEW, NEW_MS)
    store.record_provenance([Provenance("old-codex", "h", "m", "u", "codex", "/x.jsonl", 1)])
    return store


def _stored_bytes(store, sid: str) -> int:
    parsed = store.load(sid, keep_raw=True)
    return len(parsed.header_raw) + sum(len(raw) for raw in parsed.raw)


def test_every_store_has_retention(store):
    assert isinstance(store, Retention)


def test_prune_spares_held_and_new_sessions_and_logs_no_content(filled):
    store = filled
    assert store.set_hold("old-held", True) is True
    assert store.set_hold("no-such", True) is False
    assert store.holds() == ["old-held"]
    sizes = {sid: _stored_bytes(store, sid) for sid in ("old-a", "old-codex")}

    dry = store.prune(CUTOFF_MS, dry_run=True)
    assert [r.session_id for r in dry] == ["old-a", "old-codex"]
    assert sorted(store.session_ids()) == ["new-a", "old-a", "old-codex", "old-held"]
    assert store.deletion_log() == []

    only_codex = store.prune(CUTOFF_MS, agent="codex")
    assert [(r.session_id, r.entries, r.bytes) for r in only_codex] == [("old-codex", 2, sizes["old-codex"])]
    done = store.prune(CUTOFF_MS)
    assert [(r.session_id, r.entries, r.bytes) for r in done] == [("old-a", 2, sizes["old-a"])]
    assert sorted(store.session_ids()) == ["new-a", "old-held"]
    # Derived rows went with the sessions: search finds only what is left.
    assert sorted({hit.session_id for hit in store.search(SECRET)}) == ["new-a", "old-held"]
    log = store.deletion_log()
    assert [(row["session_id"], row["entries"], row["bytes"]) for row in log] == [
        ("old-codex", 2, sizes["old-codex"]), ("old-a", 2, sizes["old-a"])]
    assert all(isinstance(row["deleted_at"], int) and row["deleted_at"] > NEW_MS for row in log)
    assert SECRET not in json.dumps(log)

    assert store.set_hold("old-held", False) is True
    assert store.holds() == []
    assert [r.session_id for r in store.prune(CUTOFF_MS)] == ["old-held"]
    assert store.session_ids() == ["new-a"]
