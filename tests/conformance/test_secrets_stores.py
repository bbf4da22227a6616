"""Redaction from every store (docs/secrets.md): a session read from the store redacts with no
leak, the stored session is unchanged, and the redacted copy, stored again, keeps its
``redacted`` header marker and scans clean."""

from __future__ import annotations

from builders import header
from sessiontree.core.secrets import HEADER_MARKER, redact_parsed, scan_entries
from test_secrets import ALL_TEXT, SHAPES, SID, _leaks, _session_entries

COPY = "019cae00-0000-7000-8000-00000000a002"


def test_redacted_copy_from_every_store(store):
    store.create(header(SID), _session_entries(ALL_TEXT))
    stored = store.read(SID).to_bytes()
    assert _leaks(stored)
    copy, redactor = redact_parsed(store.read(SID))
    assert not _leaks(copy.to_bytes()) and redactor.secrets == len(SHAPES)
    assert store.read(SID).to_bytes() == stored  # the store is not changed
    store.create({**copy.header, "id": COPY}, copy.entries)
    again = store.read(COPY)
    assert again.header[HEADER_MARKER] == {"tool": "sessiontree", "placeholders": len(SHAPES)}
    assert scan_entries(again.entries) == []
    assert [e["id"] for e in again.entries] == [e["id"] for e in store.read(SID).entries]
