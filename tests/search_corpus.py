"""The hand-made search corpus: three sessions small enough to know every answer by
reading them, the expected hit set of each query (written by hand from the entries'
text), and the stores it is written into."""

from __future__ import annotations

from builders import search_header as header
from builders import search_message as msg
from sessiontree.stores import SqliteStore

T0 = "2026-01-01T10:0{}:00.000Z"


def base(entry_id, parent, kind, minute=0, **fields):
    """An entry of ``kind`` at minute ``minute`` past 10:00 on 2026-01-01."""
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": T0.format(minute), **fields}


LOREM = " ".join(["lorem ipsum dolor sit amet consectetur"] * 40)

CORPUS = [
    (header("sess-alpha", "/w/alpha"), [
        base("a1000001", None, "session_info", 0, name="Retry work"),
        msg("a2000002", "a1000001", "user", "Please fix the flaky retry in parser.py", 0),
        msg("a3000003", "a2000002", "assistant", [
            {"type": "thinking", "thinking": "the dedup step drops lines"},
            {"type": "text", "text": "I will look at _dedup_ids"},
            {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "grep -rn dedup src/",
                                                                           "timeout": 30}}], 1),
        msg("a4000004", "a3000003", "toolResult", [
            {"type": "text", "text": "src/util.py:12: def _dedup_ids(ids):"},
            {"type": "image", "data": "ZGVkdXA=", "mimeType": "image/png"}], 2,
            toolCallId="c1", toolName="bash", isError=False),
        {"type": "message", "id": "a5000005", "parentId": "a4000004", "timestamp": T0.format(3),
         "message": {"role": "bashExecution", "command": "pytest -k retry", "output": "1 failed: test_retry_backoff",
                     "exitCode": 1, "cancelled": False, "truncated": False, "timestamp": 1}},
        base("a6000006", "a5000005", "context_edit", 3, targetId="a2000002", replacement=None),
        msg("a7000007", "a6000006", "assistant", [{"type": "text", "text": "retry retry retry"}], 4),
        base("a8000008", "a6000006", "branch_summary", 5, fromId="a7000007",
             summary="Tried exponential backoff for retry"),
        base("a9000009", "a8000008", "compaction", 6, summary="old summary mentions 東京 and naïve café",
             firstKeptEntryId="a2000002", tokensBefore=10),
    ]),
    (header("sess-beta", "/w/beta"), [
        msg("b1000001", None, "user", "日本語のテキスト 東京タワー", 0),
        base("b2000002", "b1000001", "custom_message", 1, customType="x",
             content="CUSTOM NOTE: ΣΊΣΥΦΟΣ uses µ-law", display=True),
        base("b3000003", "b2000002", "session_summary", 2, summary="Summary: straße repair",
             summarizedThroughId="b1000001"),
        msg("b4000004", "b3000003", "assistant", [{"type": "text", "text": "we should retry the request once"}], 3),
    ]),
    (header("sess-gamma", "/w/alpha"), [
        msg("c1000001", None, "user", "emoji 🎉 party and a-b-c hyphen * star NEAR(x y) \"quoted\" 5 \u212aM", 0),
        msg("c2000002", "c1000001", "toolResult", [{"type": "text", "text": LOREM + " retry"}], 1,
            toolCallId="c9", toolName="read", isError=False),
        base("c3000003", "c2000002", "label", 2, targetId="c1000001", label="retry-label"),
        base("c4000004", "c3000003", "custom", 3, customType="x", data={"text": "retry"}),
    ]),
]

# Hand-derived: which entries hold each query (every term, case-folded substring).
EXPECTED = {
    "retry": {"a1000001", "a2000002", "a5000005", "a7000007", "a8000008", "b4000004", "c2000002"},
    "dedup": {"a3000003", "a4000004"},
    "grep dedup": {"a3000003"},
    "ZGVkdXA": set(),  # image data is never indexed
    "東京": {"a9000009", "b1000001"},
    "σίσυφος": {"b2000002"},  # final sigma and Ί fold like FTS5
    "μ-law": {"b2000002"},  # Greek mu finds the micro sign
    "STRAßE": {"b3000003"},
    "STRASSE": set(),  # one code point never folds to two
    "naive": set(),  # diacritics are kept
    "NAÏVE": {"a9000009"},
    "🎉": {"c1000001"},
    "a-b-c": {"c1000001"},
    "NEAR(x": {"c1000001"},
    "*": {"c1000001"},
    '"quoted"': set(),  # quotes delimit a phrase: this is the word quoted, present
    '"flaky retry"': {"a2000002"},
    "flaky parser": {"a2000002"},
    '"retry parser"': set(),
    "py": {"a2000002", "a4000004", "a5000005"},
    "30": {"a3000003"},  # a number inside tool-call arguments
    "bash": {"a3000003"},  # the tool-call name; a result's toolName is not its text
    "km": {"c1000001"},  # short, and the Kelvin sign folds to ASCII k: the SQL prefilter lets it through
    "retry-label": set(),  # labels and custom state are not indexed
}
EXPECTED['"quoted"'] = {"c1000001"}


def fill(store):
    """Write the corpus into ``store``, one create per session; returns the store."""
    for head, entries in CORPUS:
        store.create(head, entries)
    return store


def fill_tail(path):
    """The corpus written as agents write it: each session created with its first
    entry, those settled into FTS5 (as an import or a sync does at its end), then one
    append per entry. The appends stay pending (no write merges anything); the store
    is reopened read-only, so searches scan the tail and write nothing."""
    writer = SqliteStore(path)
    for head, entries in CORPUS:
        writer.create(head, entries[:1])
    assert writer.settle_derived() == len(CORPUS)  # one record per session, each merged
    for head, entries in CORPUS:
        for entry in entries[1:]:
            writer.append(head["id"], [entry])
    pending = writer.db.conn.execute("SELECT count(*) FROM entries").fetchone()[0] - len(CORPUS)
    assert writer.db.conn.execute("SELECT count(*) FROM search_entries").fetchone()[0] <= len(CORPUS) < pending
    writer.close()
    return SqliteStore(path, readonly=True)


def ids(hits):
    """The entry ids of search hits, as a set."""
    return {hit.entry_id for hit in hits}


def pending_count(store):
    """How many entries of a SQLite store are in the pending tail (not merged into the index)."""
    return store.db.conn.execute("SELECT count(*) FROM entries AS e LEFT JOIN search_merged AS m"
                               " ON m.session_id = e.session_id WHERE e.seq > coalesce(m.seq, -1)").fetchone()[0]
