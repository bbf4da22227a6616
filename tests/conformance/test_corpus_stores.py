"""The real corpus through every store: import, list, export, re-import.

Expected values were derived with jq from the files themselves: message entries over all roles, the first user text,
the newest user/assistant message timestamp.
"""

from __future__ import annotations

from datetime import UTC, datetime

import corpus
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.sqlite.store import SqliteStore

FILES = corpus.shared_files()

pytestmark = corpus.NEEDS_SHARED

EXPECTED = {
    "d703a1a9-1b7b-4fb1-b512-c9738b1fe617": {  # pi-mono-large-session.jsonl
        "message_count": 914,
        "entries": 1018,
        "first_message": "/mode",
        "modified_ms": 1763691237236,
    },
    "ffae836b-9420-4060-ac13-7745215f90ff": {  # pi-mono-before-compaction.jsonl
        "message_count": 990,
        "entries": 1002,
        "first_message_prefix": "alright, read @packages/coding-agent/src/main.ts",
        # A branched session: its newest message (00:42:39.594Z, 1765240959594) predates the
        # header's creation (00:53:29.825Z); modified is never earlier than created (docs/rules/listing.md L.16).
        "modified_ms": 1765241609825,
    },
}


def test_corpus_imports_lists_exports_and_reimports(store, tmp_path):
    before = {path: path.read_bytes() for path in FILES}
    for path in FILES:
        SessionManager.import_from_jsonl(str(path), None, store)
    rows = {row.id: row for row in SessionManager.list_all(store)}
    assert set(rows) == set(EXPECTED)
    for session_id, expected in EXPECTED.items():
        row = rows[session_id]
        assert row.message_count == expected["message_count"]
        assert row.name is None and row.has_name is False
        if "first_message" in expected:
            assert row.first_message == expected["first_message"]
        else:
            assert row.first_message.startswith(expected["first_message_prefix"])
            # 668 characters (counted in the raw file): under the listing's 1,000, kept whole.
            assert len(row.first_message) == 668 and not row.first_message.endswith("…")
        assert row.modified == datetime.fromtimestamp(expected["modified_ms"] / 1000, tz=UTC)
        assert row.cwd == "/Users/badlogic/workspaces/pi-mono"
    # newest first
    assert [r.id for r in SessionManager.list_all(store)] == [
        "ffae836b-9420-4060-ac13-7745215f90ff", "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"]

    for session_id, expected in EXPECTED.items():
        exported = store.load(session_id).to_bytes()
        out = tmp_path / f"{session_id}.jsonl"
        out.write_bytes(exported)
        parsed = read_session_file(str(out))
        assert parsed.source_version == 4 and not parsed.upgraded
        assert len(parsed.entries) == expected["entries"]
        # re-import into a fresh store of the other kind: byte-identical export
        again = SqliteStore(str(tmp_path / f"again-{session_id}.db"))
        SessionManager.import_from_jsonl(str(out), None, again)
        assert again.load(session_id).to_bytes() == exported
        again.close()
    # the input files were never modified
    assert {path: path.read_bytes() for path in FILES} == before
