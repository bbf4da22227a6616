"""The schema of a PostgreSQL store: every table, in the order its steps create them.

A database holds what the steps of :data:`MIGRATIONS` create, applied in that
order at open, under the schema lock, and recorded by name in
``schema_migrations`` (``PostgresStore``):

=======================  =====================================================
``m001_initial``         ``sessions`` (and its write counter), ``entries``, ``message_texts``
``m002_sync_state``      ``sync_state`` (not derived: what sync took from files, per host)
``m003_search_index``    ``search_entries`` and its indexes (:mod:`.search`)
``m004_usage_ledger``    ``usage_ledger`` (:mod:`.usage`)
``m005_agent_files``     ``sync_state.shape``, ``archived_files`` (not derived, per host)
``m006_provenance``      ``provenance`` (not derived: where each session came from)
``m007_cache_write_1h``  ``usage_ledger.cache_write_1h`` (the 1-hour part of a call's cache writes)
``m008_team``            owners, row-level security, aggregate views, ``team_audit``,
                         ``holds``, ``deletion_log`` (:mod:`.team`, docs/team.md)
``m009_usage_rollup``    ``usage_rollup``, ``usage_ledger.shared``, ``usage_settle`` (:mod:`.usage`),
                         the aggregate views read from the rollup (:mod:`.team`)
``m010_search_recent``   ``search_entries_recent``: matches newest first, for frequent terms (:mod:`.search`)
``m011_owner_recent``    ``search_entries_owner_recent``, ``own_recent_rows``: a member's frequent
                         words, their own newest matches (:mod:`.recent`)
``m012_usage_daily``     ``usage_daily``: per owner and UTC day, what the aggregates by user read (:mod:`.daily`)
``m013_filtered_walk``   ``own_recent_rows`` with the search filters: a member's filtered search walks
                         their newest rows too (:mod:`.recent`)
``m014_lean_indexes``    ``search_entries_tsv`` dropped (unused), ``search_entries_owner_recent``
                         narrowed to ``(owner, time)``; hash indexes for ``message_texts`` and
                         ``usage_ledger_key``
=======================  =====================================================

From ``m008_team`` on, every table is private by construction (docs/team.md): a
step creating a table must enable row-level security on it with a policy (as
:func:`~sessiontree.stores.postgres.team.m008_team` does for each kind of table) and
add its grants to :func:`~sessiontree.stores.postgres.team.grant_team`;
``tests/stores/test_team_store.py`` fails on a table without row-level security.

Add new steps at the end; never edit one that has been applied (its name and
SQL are what existing databases recorded). The steps creating derived tables
fill them from the entries already stored, through their index module.
:data:`DERIVED_INDEXES` lists the indexes every write maintains.
"""

from __future__ import annotations

from typing import Any

from sessiontree.stores.postgres import search, team, usage
from sessiontree.stores.postgres.daily import m012_usage_daily
from sessiontree.stores.postgres.derived import DerivedIndex, Migration
from sessiontree.stores.postgres.recent import m011_owner_recent, m013_filtered_walk
from sessiontree.stores.postgres.search import TSV_CHARS
from sessiontree.stores.postgres.team import m008_team
from sessiontree.stores.steps import schema_steps

__all__ = ["DERIVED_INDEXES", "MIGRATIONS"]


def m001_initial(conn: Any) -> None:
    """Sessions, their entries, and the listing text kept apart."""
    conn.execute("""
        CREATE TABLE sessions (
            -- The header id: what load(id), append(id) and delete(id) look up.
            id text PRIMARY KEY,
            -- Insertion order: listing ties and session_ids() keep it.
            rowno bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
            -- The header record's exact JSON text, and its CRC-32 at write time.
            header_json bytea NOT NULL,
            header_crc bigint NOT NULL,
            -- Copies of header fields for SQL and filters (U+FFFD for what text
            -- cannot hold); rewritten with header_json by replace_header.
            created_at text,
            cwd text,
            parent_session_id text,
            -- A valid workflow classification (docs/rules/listing.md O.1): internal session.
            classified boolean NOT NULL DEFAULT false,
            -- Wall-clock microseconds of the last write: modified time fallback.
            updated_at bigint NOT NULL,
            -- Store-wide order of writes (a sequence, so no global lock is
            -- needed): recency for find_most_recent (docs/rules/listing.md M.3).
            write_seq bigint NOT NULL,
            -- Number of stored entries (= next seq).
            entry_count integer NOT NULL DEFAULT 0,
            -- Derived: the InfoAccumulator state (to_state()) as exact JSON
            -- bytes, updated from appended entries only, so listing never
            -- reads entries; reindex() recomputes it.
            listing bytea NOT NULL,
            -- Derived copies of listing values for SQL (reports, sorting).
            message_count integer NOT NULL DEFAULT 0,
            modified_ms double precision NOT NULL DEFAULT 0,
            name text
        )""")
    conn.execute("CREATE INDEX sessions_write_seq ON sessions (write_seq)")
    conn.execute("CREATE SEQUENCE sessions_write_seq_counter AS bigint")
    conn.execute("""
        CREATE TABLE entries (
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            -- File order (0-based): export and the tree (leaf = last entry) depend on it.
            seq integer NOT NULL,
            -- Base fields copied out of json for queries; id exact, since the
            -- database enforces its uniqueness within the session.
            id text NOT NULL,
            parent_id text,
            type text NOT NULL,
            timestamp text NOT NULL,
            -- The record's exact JSON text (no newline): the one source of truth.
            json bytea NOT NULL,
            -- zlib.crc32(json) at write time, checked on every read.
            crc bigint NOT NULL,
            PRIMARY KEY (session_id, seq),
            -- Entry ids are unique within a session (docs/rules/format.md D.15/D.19).
            UNIQUE (session_id, id)
        )""")
    conn.execute("""
        CREATE TABLE message_texts (
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq integer NOT NULL,
            -- Listing text of a user/assistant message (docs/rules/listing.md L.15), exact
            -- bytes; read only when SessionInfo.all_messages_text is accessed.
            text bytea NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""")


def m002_sync_state(conn: Any) -> None:
    """What ``sessiontree sync`` last took from each source file (docs/sync.md).

    Not derived data: it describes files outside the store, so ``reindex``
    never touches it; a state is written in the same transaction as the entries
    it accounts for (:meth:`PostgresStore.sync_commit`)."""
    conn.execute("""
        CREATE TABLE sync_state (
            -- The host whose file this is (PostgresStore.sync_host): many hosts
            -- sync into one database, and a path names a file on one host only.
            host text NOT NULL,
            -- The source file, absolute, as UTF-8 bytes (surrogatepass: a path that
            -- is not valid UTF-8 survives exactly).
            path bytea NOT NULL,
            -- The header id the file holds.
            session_id text NOT NULL,
            -- File identity and size when last looked at: all equal -> unchanged.
            size bigint NOT NULL,
            mtime_ns bigint NOT NULL,
            inode numeric NOT NULL,
            dev numeric NOT NULL,
            -- Bytes from offset 0 taken into the store; a grown file is read from here.
            consumed bigint NOT NULL,
            -- Physical lines in those bytes, for file line numbers in later errors.
            lines bigint NOT NULL,
            -- Entries taken from the file (after the format upgrade).
            entries bigint NOT NULL,
            -- The format version the file declares.
            version integer NOT NULL,
            -- SHA-256 of the header line and of the last <= 4 KiB consumed.
            header_hash bytea NOT NULL,
            tail_hash bytea NOT NULL,
            -- The key of the compare-and-set.
            PRIMARY KEY (host, path)
        )""")


def m003_search_index(conn: Any) -> None:
    """The search index, filled from every session already stored.

    ``pg_trgm`` is created under the schema lock the step runs under; when it
    cannot be, the trigram index is left out and search scans (see :mod:`.search`).
    Derived data, so tables left by a hand-edited schema are dropped first."""
    conn.execute("DROP TABLE IF EXISTS search_entries")
    conn.execute(f"""
        CREATE TABLE search_entries (
            -- sessions.id and entries.seq of the entry the text comes from.
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq integer NOT NULL,
            -- Copied from the entry for the role filter (U+FFFD for what text cannot hold;
            -- the exact values are checked on the hits).
            type text NOT NULL,
            -- core.search.entry_text's role (NULL for session_info/session_summary).
            role text,
            -- The entry's timestamp in ms (NULL when it does not parse), for since/until.
            ts_ms double precision,
            -- fold(entry_text(entry).text): what queries match, by substring.
            folded text NOT NULL,
            -- Its words, for ranking (ts_rank); only the first {TSV_CHARS} characters,
            -- since a tsvector is limited to 1 MB.
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, left(folded, {TSV_CHARS}))) STORED,
            PRIMARY KEY (session_id, seq)
        )""")
    conn.execute("CREATE INDEX search_entries_tsv ON search_entries USING gin (tsv)")
    search.ensure_trigram_index(conn)
    search.fill_index(conn)


def m004_usage_ledger(conn: Any) -> None:
    """The ``usage_ledger`` table, filled from the entries already stored. Derived data:
    a table left by a hand-edited schema is dropped and rebuilt, not trusted."""
    conn.execute("DROP TABLE IF EXISTS usage_ledger")
    conn.execute("""
        CREATE TABLE usage_ledger (
            -- sessions.id and entries.seq of the entry, and the record's index within it.
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq integer NOT NULL,
            n integer NOT NULL,
            -- core.usage.dedup_key: 16 bytes identifying the billed call by content,
            -- equal in every copy of the entry (forks, imports).
            dedup_key bytea NOT NULL,
            -- assistant, toolResult, session_summary, compaction, branch_summary, usage.
            source text NOT NULL,
            provider text,
            model text,
            -- Unix milliseconds (UTC) of the record: filters and 15-minute buckets.
            ts_ms bigint NOT NULL,
            -- Tokens as recorded, and cost.total in nano-dollars (NULL: unusable,
            -- to be priced from a catalogue when asked).
            input numeric NOT NULL,
            output numeric NOT NULL,
            cache_read numeric NOT NULL,
            cache_write numeric NOT NULL,
            cost_nanos numeric,
            PRIMARY KEY (session_id, seq, n)
        )""")
    # The de-duplicating GROUP BY and the session mode's "held by an earlier session?".
    conn.execute("CREATE INDEX usage_ledger_key ON usage_ledger (dedup_key)")
    usage.fill_ledger(conn)


def m005_agent_files(conn: Any) -> None:
    """What it takes to give agent files back (docs/agent-loop.md): each synced file's
    shape, and the audit record of every file ``sessiontree archive`` moved away,
    per host as ``sync_state`` is (a path names a file on one host).

    Not derived data: ``reindex`` never touches them. States recorded before this
    step have no shape (``NULL``); the next sync that reads their file whole records one.
    """
    conn.execute("ALTER TABLE sync_state ADD COLUMN shape bytea")
    conn.execute("""
        CREATE TABLE archived_files (
            host text NOT NULL,
            -- Where the file was, absolute, as UTF-8 bytes (surrogatepass).
            path bytea NOT NULL,
            -- SHA-256 of its bytes, proved equal to the store's rebuild before the move.
            sha256 bytea NOT NULL,
            session_id text NOT NULL,
            size bigint NOT NULL,
            agent text NOT NULL,
            -- Milliseconds since the epoch (UTC).
            archived_at bigint NOT NULL,
            -- 'trash' or 'deleted'.
            destination text NOT NULL,
            -- 'pending' (written before the move) or 'done'.
            state text NOT NULL,
            -- Insertion order, for "oldest first".
            seq bigserial,
            PRIMARY KEY (host, path, sha256)
        )""")


def m006_provenance(conn: Any) -> None:
    """Where each session came from (docs/sync.md, "Provenance"; docs/postgres.md): one
    row per session, written by the ``sync`` commit that creates it (or right after an
    ``import``) with ``ON CONFLICT DO NOTHING``, so the first host to store a session
    keeps it as its origin whatever other hosts sync later. Not derived data:
    ``reindex`` never touches it. Sessions stored before this step have none.
    """
    conn.execute("""
        CREATE TABLE provenance (
            session_id text PRIMARY KEY,
            host text NOT NULL,
            machine_id text NOT NULL,
            user_name text NOT NULL,
            -- 'pi', 'atomic', 'claude', 'codex' or ''.
            agent text NOT NULL,
            -- The file on that host, or '<store url>#<id>'.
            source text NOT NULL,
            -- Milliseconds since the epoch (UTC).
            recorded_at bigint NOT NULL
        )""")


def m007_cache_write_1h(conn: Any) -> None:
    """1-hour cache writes kept apart in the ledger (docs/usage.md, "Claude Code"):
    ``cache_write_1h``, the part of ``cache_write`` written to the 1-hour cache, priced at
    its own rate. Existing rows get 0 (``reindex`` or a re-sync fills them)."""
    conn.execute("ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS cache_write_1h numeric NOT NULL DEFAULT 0")


def m009_usage_rollup(conn: Any) -> None:
    """Usage rollups (docs/postgres.md, "Usage rollups"): ``usage_rollup`` filled from the
    ledger, each ledger row settled as rolled or shared, the aggregate views rewritten to
    read the rollup, and the grants (:func:`~sessiontree.stores.postgres.team.grant_team`)."""
    usage.create_rollup(conn)
    team.rollup_views(conn)
    team.grant_team(conn)


def m010_search_recent(conn: Any) -> None:
    """The index a search with frequent terms walks newest first, stopping after
    :data:`~sessiontree.stores.postgres.search.EARLY_STOP` matches (docs/search.md,
    "Frequent terms on PostgreSQL"). An index only: no new table, no new grant."""
    conn.execute("CREATE INDEX IF NOT EXISTS search_entries_recent ON search_entries ((coalesce(ts_ms, 0)) DESC)")


def m014_lean_indexes(conn: Any) -> None:
    """Four indexes made smaller or dropped (docs/postgres.md, "Database size"):

    * ``search_entries_tsv`` (GIN over ``tsv``, step ``m003_search_index``) is dropped: no
      query asks it (matching is ``LIKE``/``strpos`` on ``folded``; ranking reads ``tsv``
      from the row), and every write paid for it (a GIN entry per word, pending-list
      merges). The ``tsv`` column stays: ranking reads it.
    * ``search_entries_owner_recent`` (step ``m011_owner_recent``) keeps only what the
      member's walk seeks on, ``(owner, time newest first)``; the session id and ``seq``
      that broke ties in the index (about 45 of its 80 bytes per row) are sorted by the
      walk on the few rows of one millisecond (an incremental sort). Same name, same
      use: the ``own_rows`` policies and the walk.
    * ``message_texts`` is only ever looked up by whole session (the listing text of one
      session, in ``seq`` order; deleted, re-owned and rebuilt by session), so its
      primary key ``(session_id, seq)``, 37 bytes of session id in every entry, becomes
      a hash index on ``session_id`` (a 4-byte hash per row, full pages): 959 -> about
      300 MB at 10,000,000 entries. The rows are derived (written with their entries,
      compared with a rebuild by ``check --store``), so nothing relies on the key's
      uniqueness; a table without a primary key needs ``REPLICA IDENTITY FULL`` before
      it can be in a logical-replication publication (physical replicas, the documented
      way to scale reads, are unaffected).
    * ``usage_ledger_key`` (a btree over the 16-byte ``dedup_key``, step
      ``m004_usage_ledger``) is only asked for equal keys (does another session hold
      this call?), so it becomes a hash index of the same name: 255 -> 128 MB at
      10,000,000 entries.

    Done under the step's lock: at 10,000,000 entries the three builds took 67 s on a
    2-core machine, during which writes to those tables wait. An index already built
    with the new definition under its name (``CREATE INDEX CONCURRENTLY`` beforehand,
    for a large database) is kept as it is."""
    conn.execute("DROP INDEX IF EXISTS search_entries_tsv")
    _replace_index(conn, "search_entries_owner_recent", "(owner, COALESCE(ts_ms, (0)::double precision) DESC)",
                   "CREATE INDEX search_entries_owner_recent ON search_entries (owner, (coalesce(ts_ms, 0)) DESC)")
    conn.execute("ALTER TABLE message_texts DROP CONSTRAINT IF EXISTS message_texts_pkey")
    conn.execute("CREATE INDEX IF NOT EXISTS message_texts_session ON message_texts USING hash (session_id)"
                 " WITH (fillfactor = 100)")
    _replace_index(conn, "usage_ledger_key", "USING hash (dedup_key)",
                   "CREATE INDEX usage_ledger_key ON usage_ledger USING hash (dedup_key) WITH (fillfactor = 100)")


def _replace_index(conn: Any, name: str, wanted: str, create: str) -> None:
    """Create index ``name`` with ``create`` unless it exists already with a definition
    holding ``wanted`` (built beforehand with ``CREATE INDEX CONCURRENTLY`` and renamed,
    docs/postgres.md, "Database size"), dropping a different one of that name first."""
    row = conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s",
                       (name,)).fetchone()
    if row is not None and wanted in row[0]:
        return
    conn.execute(f"DROP INDEX IF EXISTS {name}")
    conn.execute(create)


#: Schema steps ``(name, function)`` in number order; add new steps, never edit applied ones.
MIGRATIONS: list[tuple[str, Migration]] = schema_steps(
    m001_initial,
    m002_sync_state,
    m003_search_index,
    m004_usage_ledger,
    m005_agent_files,
    m006_provenance,
    m007_cache_write_1h,
    m008_team,
    m009_usage_rollup,
    m010_search_recent,
    m011_owner_recent,
    m012_usage_daily,
    m013_filtered_walk,
    m014_lean_indexes,
)

#: Every derived index, maintained by each write in this order (their tables come
#: from the steps above).
DERIVED_INDEXES: list[DerivedIndex] = [search.INDEX, usage.LEDGER]
