"""The contentless SQLite search index (schema step ``m014_contentless_search``,
docs/decisions/contentless-search.md): the text is stored once (in the records),
FTS5 holds only trigrams (``detail=none``), every candidate is checked against the
text extracted again, and a bulk import settles each group from the entries in hand."""

from __future__ import annotations

import sqlite3

from cli_support import run_cli
from search_corpus import CORPUS, EXPECTED, fill, header, ids, msg
from sessiontree.core.search import entry_text
from sessiontree.format import jsonio
from sessiontree.session.manager import SessionManager
from sessiontree.stores import MemoryStore, SqliteStore
from sessiontree.stores.sqlite import search as sqlite_search


def integrity_check(store: SqliteStore) -> None:
    store.db.conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")


def columns(store: SqliteStore) -> list[str]:
    return [row[1] for row in store.db.conn.execute("PRAGMA table_info(search_entries)")]


def all_hits(store, queries) -> dict[str, set[str]]:
    return {query: ids(store.search(query, limit=None)) for query in queries}


def search_problems(store) -> list:
    """``check --store`` problems of the derived search and usage rows (the corpus has
    retired records, reported for what they are)."""
    return [p for p in store.verify() if "search" in p.message or "usage" in p.message]


def downgrade(path) -> None:
    """Turn a current store back into the layout before ``m014_contentless_search``:
    ``search_entries`` with its ``text``, an external-content ``detail=full`` FTS5."""
    conn = sqlite3.connect(path)
    texts = {}
    for rowid, data in conn.execute("SELECT e.rowid, en.json FROM search_entries AS e"
                                    " JOIN entries AS en ON en.session_id = e.session_id AND en.seq = e.seq"):
        texts[rowid] = entry_text(jsonio.loads(data)).text
    conn.execute("DROP TABLE search_fts")
    conn.execute("ALTER TABLE search_entries RENAME TO search_entries_new")
    conn.execute("CREATE TABLE search_entries (rowid INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER"
                 " NOT NULL, entry_id TEXT NOT NULL, type TEXT NOT NULL, role TEXT, ts_ms REAL, text TEXT NOT NULL,"
                 " UNIQUE (session_id, seq))")
    rows = conn.execute("SELECT rowid, session_id, seq, entry_id, type, role, ts_ms FROM search_entries_new").fetchall()
    conn.executemany("INSERT INTO search_entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     [(*row, texts[row[0]]) for row in rows])
    conn.execute("DROP TABLE search_entries_new")
    conn.execute("CREATE VIRTUAL TABLE search_fts USING fts5(text, content='search_entries', content_rowid='rowid',"
                 " tokenize='trigram case_sensitive 0')")
    conn.execute("INSERT INTO search_fts (search_fts) VALUES ('rebuild')")
    conn.execute("DELETE FROM schema_migrations WHERE name = 'm014_contentless_search'")
    conn.commit()
    conn.close()


def test_the_text_is_stored_once(tmp_path):
    store = fill(SqliteStore(tmp_path / "s.db"))
    store.settle_derived()
    assert "text" not in columns(store)
    ddl = store.db.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'search_fts'").fetchone()[0]
    assert "content=''" in ddl and "detail=none" in ddl
    # chars is the length of the extracted text: "Retry work" has 10 code points.
    assert store.db.conn.execute("SELECT chars FROM search_entries WHERE entry_id = 'a1000001'").fetchone() == (10,)
    integrity_check(store)
    assert all_hits(store, EXPECTED) == EXPECTED


def test_step_m014_converts_an_older_index(tmp_path):
    """A store indexed in the old layout (text kept twice) is converted on its first
    writable open; a read-only open before that answers by scanning, with the same hits."""
    path = tmp_path / "s.db"
    store = fill(SqliteStore(path))
    store.settle_derived()
    store.close()
    downgrade(path)
    readonly = SqliteStore(path, readonly=True)
    assert all_hits(readonly, EXPECTED) == EXPECTED  # the old layout is scanned, not misread
    assert search_problems(readonly) == []  # check --store reads the old layout too
    readonly.close()
    migrated = SqliteStore(path)
    assert "m014_contentless_search" in migrated.applied_migrations()
    assert "text" not in columns(migrated)
    assert migrated.db.conn.execute("SELECT count(*) FROM search_entries").fetchone()[0] == 14
    integrity_check(migrated)
    assert all_hits(migrated, EXPECTED) == EXPECTED
    assert [h.entry_id for h in migrated.search("retry", limit=None)][:2] == ["a1000001", "a7000007"]
    assert search_problems(migrated) == []
    migrated.close()


TRICKY = [
    (header("sess-x", "/w/x"), [
        msg("x1000001", None, "user", "Install PY modules", 0),
        msg("x2000002", "x1000001", "user", "\u017fo the temperature sign: \u212a", 1),
        {"type": "message", "id": "x3000003", "parentId": "x2000002", "timestamp": "2026-01-01T10:02:00.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "toolCall", "id": "c1", "name": "sleep", "arguments": {"seconds": 1e-7}}],
             "provider": "p", "model": "m", "usage": {"input": 1, "output": 1}, "stopReason": "toolUse",
             "timestamp": 1}},
        msg("x4000004", "x3000003", "user", "python escaped", 3),
        msg("x5000005", "x4000004", "user", 'quote"d back\\slash /here', 4),
    ]),
]
#: x4's record written by hand with every letter of "python" as a \\u escape.
ESCAPED = (b'{"type":"message","id":"x4000004","parentId":"x3000003","timestamp":"2026-01-01T10:03:00.000Z",'
           b'"message":{"role":"user","content":"\\u0070\\u0079\\u0074\\u0068\\u006f\\u006e escaped","timestamp":3}}')
SHORT = ["py", "so", "k", "-0", "07", "7e", 'e"', "k\\", "/h", "x"]


def test_short_terms_scan_the_records_and_find_what_a_scan_finds(tmp_path):
    """Queries of one- and two-character terms are prefiltered on the records' JSON in
    C: the prefilter lets through every true match (case, U+017F and U+212A, \\u
    escapes, a float argument whose text is its repr), and the rule decides."""
    store = SqliteStore(tmp_path / "s.db")
    memory = MemoryStore()
    for head, entries in TRICKY:
        raw = [ESCAPED if entry["id"] == "x4000004" else None for entry in entries]
        store.create(head, entries, raw)
        memory.create(head, entries)
    store.settle_derived()
    expected = all_hits(memory, SHORT)
    # Worked out by hand: "PY" and the escaped "python"; U+017F folds to s; U+212A to k;
    # the record holds 1e-7 (JavaScript's form), whose text is Python's repr "1e-07": "-0"
    # and "07" match it although the record does not hold them.
    assert expected["py"] == {"x1000001", "x4000004"}
    assert expected["so"] == {"x2000002"}
    assert expected["k"] == {"x2000002", "x5000005"}  # the Kelvin sign; "back"
    assert expected["-0"] == expected["07"] == {"x3000003"}
    assert expected["7e"] == set()
    assert expected['e"'] == expected["k\\"] == expected["/h"] == {"x5000005"}  # JSON escapes them
    assert all_hits(store, SHORT) == expected
    assert all_hits(store, ["python", "1e-07", "seconds"]) == all_hits(memory, ["python", "1e-07", "seconds"])


def test_a_removed_session_whose_record_was_damaged_rebuilds_the_index(tmp_path):
    """Forgetting a row needs its old text, extracted again from its record; a record
    damaged by hand since the merge makes the removal rebuild FTS5 from the others."""
    store = fill(SqliteStore(tmp_path / "s.db"))
    store.settle_derived()
    store.db.conn.execute("UPDATE entries SET json = x'7b' WHERE session_id = 'sess-beta' AND seq = 0")
    store.db.conn.execute("UPDATE entries SET json = x'7b' WHERE session_id = 'sess-alpha' AND seq = 6")  # a7
    assert "a7000007" not in ids(store.search("retry", limit=None))  # no text left: no hit
    store.delete("sess-beta")
    integrity_check(store)
    beta = {entry["id"] for entry in CORPUS[1][1]}
    for query, hits in EXPECTED.items():
        assert ids(store.search(query, limit=None)) == hits - beta - {"a7000007"}, query
    store.delete("sess-alpha")  # the damaged a7 is forgotten too
    integrity_check(store)
    assert ids(store.search("retry", limit=None)) == {"c2000002"}


def write_files(directory, sessions):
    paths = []
    for head, entries in sessions:
        path = directory / f"{head['id']}.jsonl"
        path.write_bytes(b"".join(jsonio.dumps(record) + b"\n" for record in [head, *entries]))
        paths.append(path)
    return paths


def index_rows(store):
    conn = store.db.conn
    return (sorted(conn.execute("SELECT session_id, seq, entry_id, type, role, ts_ms, chars FROM search_entries")),
            sorted(conn.execute("SELECT e.session_id, e.entry_id FROM search_off_branch AS o"
                                " JOIN search_entries AS e ON e.rowid = o.rowid")),
            sorted(conn.execute("SELECT session_id, seq FROM search_merged")),
            sorted(conn.execute("SELECT session_id, seq, n, dedup_key FROM usage_ledger")),
            sorted(conn.execute("SELECT session_id, seq FROM usage_merged")),
            sorted(conn.execute("SELECT * FROM usage_calls")),
            sorted(conn.execute("SELECT * FROM usage_rollup")))


def test_import_settling_as_it_writes_equals_a_settle_after(tmp_path):
    """``import_files(settle=True)`` writes, in each group's transaction, exactly the
    index and ledger rows the settle writes afterwards, and leaves nothing pending."""
    (tmp_path / "files").mkdir()
    paths = write_files(tmp_path / "files", CORPUS + TRICKY)
    inline = SqliteStore(tmp_path / "inline.db")
    outcomes = list(SessionManager.import_files(paths, None, inline, settle=True, batch_sessions=2))
    assert [o.error for o in outcomes] == [None] * 4
    assert sqlite_search.pending_records(inline.db.conn) == 0
    marks = inline.db.conn.execute("SELECT (SELECT updated_at FROM search_state), (SELECT updated_at FROM usage_state),"
                                 " (SELECT max(updated_at) FROM sessions)").fetchone()
    assert marks[0] == marks[1] == marks[2]  # nothing pending: the marks moved too
    assert inline.settle_derived() == 0
    after = SqliteStore(tmp_path / "after.db")
    list(SessionManager.import_files(paths, None, after))
    assert sqlite_search.pending_records(after.db.conn) > 0
    after.settle_derived()
    assert index_rows(inline) == index_rows(after)
    integrity_check(inline)
    queries = [*EXPECTED, *SHORT]
    assert {q: [h.entry_id for h in inline.search(q, limit=None)] for q in queries} == \
        {q: [h.entry_id for h in after.search(q, limit=None)] for q in queries}
    assert inline.usage() == after.usage()
    assert search_problems(inline) == [] and search_problems(after) == []


def test_import_command_says_search_is_ready(tmp_path):
    (tmp_path / "files").mkdir()
    write_files(tmp_path / "files", CORPUS)
    result = run_cli(str(tmp_path / "s.db"), "import", str(tmp_path / "files"))
    # 9 + 4 + 4 entries in the three sessions of the corpus.
    assert "3 imported" in result.stdout and "search ready (17 entries indexed)" in result.stdout
    store = SqliteStore(tmp_path / "s.db")
    assert sqlite_search.pending_records(store.db.conn) == 0
    assert all_hits(store, EXPECTED) == EXPECTED
    store.close()


def test_reindex_rebuilds_a_lost_index(tmp_path):
    """The index is derived: emptied by hand, ``reindex`` gives it back whole."""
    store = fill(SqliteStore(tmp_path / "s.db"))
    store.settle_derived()
    store.db.conn.execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
    assert ids(store.search("retry", limit=None)) == set()  # FTS5 finds no candidate
    store.reindex()
    integrity_check(store)
    assert all_hits(store, EXPECTED) == EXPECTED
    assert search_problems(store) == []
