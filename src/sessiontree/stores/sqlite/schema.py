"""The schema of a SQLite store: every table, in the order its steps create them.

A database holds what the steps of :data:`MIGRATIONS` create, applied in that
order at open and recorded by name in ``schema_migrations`` (``SqliteStore``):

============================  =====================================================
``m001_initial``              ``sessions``, ``entries``, ``message_texts``
``m002_record_crc``           a CRC-32 of every stored record
``m003_sync_state``           ``sync_state`` (not derived: what sync took from files)
``m004_search_index``         ``search_entries``, ``search_fts`` (:mod:`.search`)
``m005_search_pending``       ``search_merged``, ``search_state`` (the pending tail)
``m006_usage_ledger``         ``usage_ledger``, ``usage_calls`` (:mod:`.usage`)
``m007_usage_rollup``         ``usage_rollup``
``m008_search_branch``        ``search_off_branch``
``m009_agent_files``          ``sync_state.shape``, ``archived_files`` (not derived)
``m010_provenance``           ``provenance`` (not derived: where each session came from)
``m011_bulk_settle``          ``usage_merged``, ``usage_state`` (the ledger's pending tail); FTS5 automerge
``m012_outline_index``        ``entries_outline``: a covering index of the outline's columns
``m013_blobs``                ``blobs``, ``entry_blobs`` (large image data out of line, :mod:`.blobs`)
``m014_contentless_search``   ``search_fts`` contentless, ``detail=none``; ``search_entries`` without text
``m015_texts_tail``           ``sessions.texts_from`` (the listing texts' pending tail)
``m016_cache_write_1h``       ``usage_ledger.cache_write_1h`` (the 1-hour part of a call's cache writes)
``m017_retention``            ``holds``, ``deletion_log`` (:mod:`.retention`, docs/team.md)
``m018_tool_calls``           ``tool_calls``: each entry's tool calls (:mod:`.toolcalls`, for ``diff``)
============================  =====================================================

Add new steps at the end; never edit one that has been applied (its name and
SQL are what existing databases recorded). The steps creating derived tables
fill them from the entries already stored, through their index module.
:data:`DERIVED_INDEXES` lists the indexes every write maintains.
"""

from __future__ import annotations

import sqlite3

from sessiontree.stores.sqlite import blobs, search, usage
from sessiontree.stores.sqlite.derived import DerivedIndex, Migration, record_crc
from sessiontree.stores.sqlite.retention import m017_retention
from sessiontree.stores.sqlite.toolcalls import m018_tool_calls
from sessiontree.stores.steps import schema_steps

__all__ = ["DERIVED_INDEXES", "MIGRATIONS"]


def m001_initial(conn: sqlite3.Connection) -> None:
    """Sessions, their entries, and the listing text kept apart."""
    conn.execute("""
        CREATE TABLE sessions (
            -- The header id: what load(id), append(id) and delete(id) look up.
            id TEXT PRIMARY KEY,
            -- The header record's exact JSON text: the truth for the header,
            -- written back byte for byte on export.
            header_json BLOB NOT NULL,
            -- Copies of header fields, so listing and filters need not parse
            -- header_json; rewritten with it by replace_header.
            created_at TEXT,
            cwd TEXT,
            parent_session_id TEXT,
            -- 1 when the header is a valid workflow classification (docs/rules/listing.md
            -- O.1): listings skip internal sessions without parsing anything.
            classified INTEGER NOT NULL DEFAULT 0,
            -- Microseconds since the Unix epoch of the last write, strictly
            -- increasing across the store: recency for find_most_recent (docs/rules/listing.md M.3).
            updated_at INTEGER NOT NULL,
            -- Number of stored entries.
            entry_count INTEGER NOT NULL DEFAULT 0,
            -- The InfoAccumulator state (to_state()), updated from appended
            -- entries only, so listing never reads entries (docs/rules/listing.md L.14-L.16,
            -- J, K). Derived data: reindex() recomputes it.
            message_count INTEGER NOT NULL DEFAULT 0,
            first_message TEXT,
            modified_ms REAL NOT NULL DEFAULT 0,
            has_name INTEGER NOT NULL DEFAULT 0,
            name TEXT,
            anchor_id TEXT,
            summary_through TEXT,
            summary_text TEXT
        )""")
    # find_most_recent walks sessions newest first; writes read max(updated_at).
    conn.execute("CREATE INDEX sessions_updated_at ON sessions (updated_at)")
    conn.execute("""
        CREATE TABLE entries (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            -- File order (0-based): JSONL order is insertion order, and export
            -- and the tree (leaf = last entry) depend on it.
            seq INTEGER NOT NULL,
            -- Base fields copied out of json for queries and the uniqueness check.
            id TEXT NOT NULL,
            parent_id TEXT,
            type TEXT NOT NULL,
            timestamp TEXT NOT NULL,
            -- The record's exact JSON text (no newline): the one source of truth.
            json BLOB NOT NULL,
            PRIMARY KEY (session_id, seq),
            -- Entry ids are unique within a session (docs/rules/format.md D.15/D.19).
            UNIQUE (session_id, id)
        )""")
    conn.execute("""
        CREATE TABLE message_texts (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            -- seq of the entry the text came from: keeps file order.
            seq INTEGER NOT NULL,
            -- Non-empty listing text of a user/assistant message (docs/rules/listing.md L.15).
            -- Kept out of sessions because it grows with the transcript; read
            -- only when SessionInfo.all_messages_text is accessed.
            text TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""")


def m002_record_crc(conn: sqlite3.Connection) -> None:
    """A CRC-32 of every stored record, recorded when it is written and checked on
    every read, so silent damage to a record's bytes is an error, never exported
    as the original.

    ``entries.crc`` is ``zlib.crc32(entries.json)``, ``sessions.header_crc`` is
    ``zlib.crc32(sessions.header_json)``. Rows already present when a database
    is upgraded are checksummed as they are at that moment: they are trusted as
    of the upgrade, and only damage after it is detected.
    """
    conn.create_function("sessiontree_crc32", 1, record_crc, deterministic=True)
    conn.execute("ALTER TABLE entries ADD COLUMN crc INTEGER")
    conn.execute("ALTER TABLE sessions ADD COLUMN header_crc INTEGER")
    conn.execute("UPDATE entries SET crc = sessiontree_crc32(json)")
    conn.execute("UPDATE sessions SET header_crc = sessiontree_crc32(header_json)")


def m003_sync_state(conn: sqlite3.Connection) -> None:
    """What ``sessiontree sync`` last took from each source file (docs/sync.md).

    Not derived data: it describes files outside the store, so ``reindex``
    never touches it, and a session's rows are written in the same transaction
    as the entries they account for (the compare-and-set that keeps two sync
    processes from appending the same entries twice).
    """
    conn.execute("""
        CREATE TABLE sync_state (
            -- The source file, absolute (a str; BLOB when it holds surrogates).
            path TEXT PRIMARY KEY,
            -- The header id the file holds.
            session_id TEXT NOT NULL,
            -- File identity and size when last looked at: all equal -> unchanged,
            -- and the file is skipped without being opened.
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            inode INTEGER NOT NULL,
            dev INTEGER NOT NULL,
            -- Bytes from offset 0 taken into the store; a grown file is read from here.
            consumed INTEGER NOT NULL,
            -- Physical lines in those bytes, for file line numbers in later errors.
            lines INTEGER NOT NULL,
            -- Entries taken from the file (after the format upgrade).
            entries INTEGER NOT NULL,
            -- The format version the file declares.
            version INTEGER NOT NULL,
            -- SHA-256 of the header line and of the last <= 4 KiB consumed: appended
            -- bytes are trusted only while both still match.
            header_hash BLOB NOT NULL,
            tail_hash BLOB NOT NULL
        )""")


def m004_search_index(conn: sqlite3.Connection) -> None:
    """The full-text index, filled from every session already stored.

    Derived data, so the step rebuilds it from nothing: tables left by an
    interrupted or hand-edited schema are dropped first. (Frozen as applied:
    the pending-tail tables come with :func:`m005_search_pending`.)"""
    conn.execute("DROP TABLE IF EXISTS search_fts")
    conn.execute("DROP TABLE IF EXISTS search_entries")
    conn.execute("""
        CREATE TABLE search_entries (
            -- Also the rowid of search_fts (external content).
            rowid INTEGER PRIMARY KEY,
            -- sessions.id and entries.seq of the entry the text comes from.
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            -- Copied from the entry for hits and filters, so a hit needs no JSON parse.
            entry_id TEXT NOT NULL,
            type TEXT NOT NULL,
            -- core.search.entry_text's role (NULL for session_info/session_summary).
            role TEXT,
            -- The entry's timestamp in ms (NULL when it does not parse), for since/until.
            ts_ms REAL,
            -- core.search.entry_text's text: the one copy snippets and checks read.
            text TEXT NOT NULL,
            UNIQUE (session_id, seq)
        )""")
    conn.execute(f"CREATE VIRTUAL TABLE search_fts USING fts5(text, content='search_entries',"
                 f" content_rowid='rowid', tokenize='{search.TOKENIZER}')")
    search.fill_index(conn)
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_off_branch'").fetchone() is not None:
        # Run again on a later schema (the tables were dropped by hand): the rowids are new.
        conn.execute("DELETE FROM search_off_branch")
        search.mark_off_branch_everywhere(conn)
    if conn.execute("SELECT 1 FROM schema_migrations WHERE name = 'm014_contentless_search'").fetchone():
        search.to_contentless(conn)  # run again on a later schema: the layout of that step


def m005_search_pending(conn: sqlite3.Connection) -> None:
    """The pending tail: per-session watermarks of what FTS5 holds, and the mark of the
    last full merge. Every session already stored is indexed whole (step m004 and the
    writes since), so each watermark starts at its last entry."""
    conn.execute("DROP TABLE IF EXISTS search_merged")
    conn.execute("DROP TABLE IF EXISTS search_state")
    conn.execute("""
        CREATE TABLE search_merged (
            -- sessions.id: entries of the session with seq <= this one are in
            -- search_entries and search_fts; later ones are pending. No row: none merged.
            session_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL
        ) WITHOUT ROWID""")
    conn.execute("""
        CREATE TABLE search_state (
            -- Only sessions with updated_at above this can hold pending entries.
            updated_at INTEGER NOT NULL
        )""")
    conn.execute("INSERT INTO search_merged (session_id, seq)"
                 " SELECT session_id, max(seq) FROM entries GROUP BY session_id")
    conn.execute("INSERT INTO search_merged (session_id, seq) SELECT id, -1 FROM sessions WHERE id NOT IN"
                 " (SELECT session_id FROM search_merged)")
    conn.execute("INSERT INTO search_state (updated_at) SELECT coalesce(max(updated_at), 0) FROM sessions")


def m006_usage_ledger(conn: sqlite3.Connection) -> None:
    """The ``usage_ledger`` and ``usage_calls`` tables, filled from the entries already stored.

    Both are derived data: tables left by an interrupted or hand-edited history
    are dropped and rebuilt rather than trusted."""
    conn.execute("DROP TABLE IF EXISTS usage_ledger")
    conn.execute("DROP TABLE IF EXISTS usage_calls")
    # WITHOUT ROWID, clustered on the content key: the de-duplicating GROUP BY of
    # query_usage is then one streaming pass over the table, with no sort and no
    # lookups (measured: benchmarks/bench_stats.py).
    conn.execute("""
        CREATE TABLE usage_ledger (
            -- core.usage.dedup_key: 16 bytes identifying the billed call by
            -- content, equal in every copy of the entry (forks, imports).
            dedup_key BLOB NOT NULL,
            -- sessions.id of the session holding the entry.
            session_id TEXT NOT NULL,
            -- entries.seq of the entry, and the record's index within it.
            seq INTEGER NOT NULL,
            n INTEGER NOT NULL,
            -- assistant, toolResult, session_summary, compaction, branch_summary, usage.
            source TEXT NOT NULL,
            provider TEXT,
            model TEXT,
            -- Unix milliseconds (UTC) of the record: filters and day grouping.
            ts_ms INTEGER NOT NULL,
            input INTEGER NOT NULL,
            output INTEGER NOT NULL,
            cache_read INTEGER NOT NULL,
            cache_write INTEGER NOT NULL,
            -- Recorded cost.total in nano-dollars; NULL when unusable (to be
            -- priced from a catalogue when asked).
            cost_nanos INTEGER,
            PRIMARY KEY (dedup_key, session_id, seq, n)
        ) WITHOUT ROWID""")
    # Deleting or reindexing one session, and show's one-session query.
    conn.execute("CREATE INDEX usage_ledger_session ON usage_ledger (session_id, seq)")
    conn.execute("""
        CREATE TABLE usage_calls (
            -- One row per billed call of the store: the ledger de-duplicated,
            -- kept up to date for the keys each write touches, so a report is
            -- one scan of this table (no GROUP BY over copies at query time).
            dedup_key BLOB PRIMARY KEY,
            -- How many times the call counts: the most rows this key has in one
            -- session (equal records inside one session are distinct calls).
            m INTEGER NOT NULL,
            -- The owner, the earliest session (createdAt, id) holding the key, as
            -- hex(sessions.id): ASCII whatever the id holds (lone surrogates are BLOBs).
            owner TEXT NOT NULL,
            provider TEXT,
            model TEXT,
            ts_ms INTEGER NOT NULL,
            input INTEGER NOT NULL,
            output INTEGER NOT NULL,
            cache_read INTEGER NOT NULL,
            cache_write INTEGER NOT NULL,
            cost_nanos INTEGER
        ) WITHOUT ROWID""")
    usage.LEDGER.rebuild_all(conn)


def m007_usage_rollup(conn: sqlite3.Connection) -> None:
    """The ``usage_rollup`` table: ``usage_calls`` summed per owner, provider, model,
    15-minute UTC bucket and priced shape, filled from ``usage_calls``. Derived data:
    a leftover table is dropped and rebuilt."""
    conn.execute("DROP TABLE IF EXISTS usage_rollup")
    conn.execute("""
        CREATE TABLE usage_rollup (
            -- usage_calls.owner: hex(sessions.id) of the session owning the calls.
            owner TEXT NOT NULL,
            -- usage_calls.provider and .model, '' for NULL (a recorded name is never
            -- empty: core.usage reads an empty one as not recorded).
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            -- Start of the 15-minute UTC bucket, Unix ms (floored): every UTC offset in
            -- use is a whole number of quarter hours, so local days are unions of buckets.
            bucket INTEGER NOT NULL,
            -- '' when the calls' recorded costs are usable; else the calls' four token
            -- counts 'input,output,cacheRead,cacheWrite': calls to be priced from the
            -- catalogue are priced per call (tiered prices are not linear in tokens).
            shape TEXT NOT NULL,
            -- Sums over the calls (usage_calls.m each): calls, tokens, recorded cost
            -- in nano-dollars (0 where unusable).
            calls INTEGER NOT NULL,
            input INTEGER NOT NULL,
            output INTEGER NOT NULL,
            cache_read INTEGER NOT NULL,
            cache_write INTEGER NOT NULL,
            cost_nanos INTEGER NOT NULL,
            PRIMARY KEY (owner, provider, model, bucket, shape)
        ) WITHOUT ROWID""")
    # Rows whose calls have all moved away (owner deleted, key re-owned): found by
    # the upkeep without scanning the table, and normally empty.
    conn.execute("CREATE INDEX usage_rollup_empty ON usage_rollup (owner) WHERE calls = 0")
    usage.rebuild_rollup(conn)


def m008_search_branch(conn: sqlite3.Connection) -> None:
    """Active-branch flags kept with the index, so a query needs no walk of each hit
    session's tree.

    ``search_off_branch`` holds the ``search_entries`` rowids of merged entries that
    are *not* on their session's active branch, as the session's records up to its
    watermark (``search_merged.seq``) give it: abandoned branches are few, so most
    sessions have no row. A query trusts these marks for a session whose last record
    is its watermark (nothing pending) and walks the tree of any other hit session.
    Kept by every merge (:func:`.search._merge`), dropped with the session's index rows, and
    rebuilt by ``reindex`` like the rest of the index. Filled here for every session
    already stored."""
    conn.execute("DROP TABLE IF EXISTS search_off_branch")
    conn.execute("""
        CREATE TABLE search_off_branch (
            -- search_entries.rowid of an entry off its session's active branch.
            rowid INTEGER PRIMARY KEY
        )""")
    search.mark_off_branch_everywhere(conn)


def m009_agent_files(conn: sqlite3.Connection) -> None:
    """What it takes to give agent files back (docs/agent-loop.md): each synced file's
    shape, and the audit record of every file ``sessiontree archive`` moved away.

    Not derived data, like ``sync_state``: ``reindex`` never touches them. States
    recorded before this step have no shape (``NULL``); the next sync that reads
    their file whole records one.
    """
    conn.execute("ALTER TABLE sync_state ADD COLUMN shape BLOB")
    conn.execute("""
        CREATE TABLE archived_files (
            -- Where the file was, absolute (a str; BLOB when it holds surrogates).
            path TEXT NOT NULL,
            -- SHA-256 of its bytes, proved equal to the store's rebuild before the move.
            sha256 BLOB NOT NULL,
            session_id TEXT NOT NULL,
            size INTEGER NOT NULL,
            agent TEXT NOT NULL,
            -- Milliseconds since the epoch (UTC).
            archived_at INTEGER NOT NULL,
            -- 'trash' or 'deleted'.
            destination TEXT NOT NULL,
            -- 'pending' (written before the move) or 'done'.
            state TEXT NOT NULL,
            PRIMARY KEY (path, sha256)
        )""")


def m010_provenance(conn: sqlite3.Connection) -> None:
    """Where each session came from (docs/sync.md, "Provenance"): written once, by the
    ``sync`` commit that creates the session or right after an ``import``, never
    overwritten. Not derived data: ``reindex`` never touches it. Sessions stored
    before this step have none.
    """
    conn.execute("""
        CREATE TABLE provenance (
            -- The session (a str; BLOB when it holds surrogates, as sessions.id).
            session_id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            machine_id TEXT NOT NULL,
            user_name TEXT NOT NULL,
            -- 'pi', 'atomic', 'claude', 'codex' or ''.
            agent TEXT NOT NULL,
            -- The file on that host, or '<store url>#<id>'.
            source TEXT NOT NULL,
            -- Milliseconds since the epoch (UTC).
            recorded_at INTEGER NOT NULL
        )""")


def m011_bulk_settle(conn: sqlite3.Connection) -> None:
    """Derived data settled in bulk, off the write path (docs/decisions/bulk-settle.md).

    * The usage ledger's pending tail: per-session watermarks of what the ledger
      holds and the mark of the last full settle, as ``search_merged`` /
      ``search_state`` are for the search index. Every session already stored has
      its ledger rows (the writes before this step wrote them), so each watermark
      starts at its last entry.
    * FTS5 ``automerge`` 16 (default 4): a settle's many bulk inserts merge
      index segments less often (about 30% less FTS5 work on a first import);
      queries read the same hits and ranks from a few more segments, measured
      no slower (bm25 does not depend on the segment layout).
    """
    conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', 16)")
    conn.execute("DROP TABLE IF EXISTS usage_merged")
    conn.execute("DROP TABLE IF EXISTS usage_state")
    conn.execute("""
        CREATE TABLE usage_merged (
            -- sessions.id: entries of the session with seq <= this one have their
            -- usage_ledger rows; later ones are pending. No row: none settled.
            session_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL
        ) WITHOUT ROWID""")
    conn.execute("""
        CREATE TABLE usage_state (
            -- Only sessions with updated_at above this can hold pending entries.
            updated_at INTEGER NOT NULL
        )""")
    conn.execute("INSERT INTO usage_merged (session_id, seq)"
                 " SELECT session_id, max(seq) FROM entries GROUP BY session_id")
    conn.execute("INSERT INTO usage_merged (session_id, seq) SELECT id, -1 FROM sessions WHERE id NOT IN"
                 " (SELECT session_id FROM usage_merged)")
    conn.execute("INSERT INTO usage_state (updated_at) SELECT coalesce(max(updated_at), 0) FROM sessions")


def m012_outline_index(conn: sqlite3.Connection) -> None:
    """A covering index of the columns an outline reads (``read_outline``: the lazy
    open, the MCP server, the viewer), in the outline's order.

    Without it the outline is an ordered scan of the ``entries`` table itself,
    whose pages mostly hold the records' JSON: reading the few columns of a
    100,000-entry session walked every page of its ~210 MB of records. The index
    holds about 80 bytes a row (8 MB for that session, under 3% of the
    database), read in order; the outline of that session takes about two
    thirds of the time (benchmarks/README.md, "Current numbers: load and
    projection").
    """
    conn.execute("CREATE INDEX IF NOT EXISTS entries_outline ON entries (session_id, seq, id, parent_id, type, crc)")
def m013_blobs(conn: sqlite3.Connection) -> None:
    """Large image data out of line (:mod:`.blobs`, docs/decisions/blobs.md): the
    content-addressed ``blobs`` table and the ``entry_blobs`` splices, then every record
    already stored that the rule cuts is rewritten cut (its CRC-32 recomputed from the
    cut text, the bytes it gives back unchanged). Records shorter than
    :data:`.blobs.THRESHOLD` are not even read.
    """
    import orjson

    blobs.create_tables(conn)
    # Keys first, each record read alone: a store of large records is never held whole.
    keys = conn.execute("SELECT session_id, seq FROM entries WHERE length(json) >= ?", (blobs.THRESHOLD,)).fetchall()
    for key, seq in keys:
        text, crc = conn.execute("SELECT json, crc FROM entries WHERE session_id = ? AND seq = ?",
                                 (key, seq)).fetchone()
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        try:
            entry = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue  # verify reports it; it stays as it is
        cut = blobs.cut_record(data, entry) if isinstance(entry, dict) else None
        if cut is None:
            continue
        if record_crc(data) != crc:
            continue  # damaged: leave it for verify to report, never rewrite it as good
        conn.execute("UPDATE entries SET json = ?, crc = ? WHERE session_id = ? AND seq = ?",
                     (cut.text, record_crc(cut.text), key, seq))
        blobs.insert_cuts(conn, key, [(seq, cut)])
def m014_contentless_search(conn: sqlite3.Connection) -> None:
    """The text stored once (docs/decisions/contentless-search.md): ``search_fts``
    becomes a contentless (``content=''``) FTS5 table with ``detail=none``, and
    ``search_entries`` loses its ``text`` column; a query extracts the text of a
    candidate from its record (``entries.json``) to check it and make the snippet.
    The same rowids, so ``search_off_branch`` and the watermarks stay valid; the
    trigrams are those of the old text (no record is parsed)."""
    search.to_contentless(conn)


def m015_texts_tail(conn: sqlite3.Connection) -> None:
    """The listing texts' pending tail (docs/decisions/append-texts-tail.md).

    ``sessions.texts_from``: the first ``seq`` whose listing text may not be in
    ``message_texts`` yet; the texts of entries from there on are derived from the
    entries when read. ``NULL``: every text is stored, which is what the writes
    before this step left, so no row changes.
    """
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
    if "texts_from" not in columns:
        conn.execute("ALTER TABLE sessions ADD COLUMN texts_from INTEGER")


def m016_cache_write_1h(conn: sqlite3.Connection) -> None:
    """1-hour cache writes kept apart in the usage tables (docs/usage.md, "Claude Code"):
    ``cache_write_1h``, the part of ``cache_write`` written to the 1-hour cache, in
    ``usage_ledger``, ``usage_calls`` and ``usage_rollup`` (whose priced shape gains it
    when it is not 0, so a catalogue prices it at its own rate). Existing rows get 0,
    what the entries synced before this step hold (the mapping that splits the writes
    came with it; ``reindex`` or a re-sync of a Claude Code file fills them)."""
    usage.ensure_hour_columns(conn)


#: Schema steps ``(name, function)`` in number order; add new steps, never edit applied ones.
MIGRATIONS: list[tuple[str, Migration]] = schema_steps(
    m001_initial,
    m002_record_crc,
    m003_sync_state,
    m004_search_index,
    m005_search_pending,
    m006_usage_ledger,
    m007_usage_rollup,
    m008_search_branch,
    m009_agent_files,
    m010_provenance,
    m011_bulk_settle,
    m012_outline_index,
    m013_blobs,
    m014_contentless_search,
    m015_texts_tail,
    m016_cache_write_1h,
    m017_retention,
    m018_tool_calls,
)

#: Every derived index, maintained by each write in this order (their tables come
#: from the steps above).
DERIVED_INDEXES: list[DerivedIndex] = [search.INDEX, usage.LEDGER]
