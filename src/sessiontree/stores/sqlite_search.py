"""The SQLite full-text index: FTS5 ``trigram`` over the text of every entry (issue 13).

Invariants:

* **Derived data** (docs/stores.md): :class:`SearchIndex` is a
  :class:`~sessiontree.stores.sqlite.DerivedIndex`. What it holds is a pure
  function of the entries, kept in their transactions: every entry is either
  *merged* (its text in ``search_entries`` and FTS5) or *pending* (after its
  session's watermark in ``search_merged``), and a query answers from both.
  It is never stale; ``store.reindex()`` rebuilds it from the entries alone.
* **The same hits as a scan.** The indexed text of an entry is exactly
  :func:`sessiontree.searchtext.entry_text`, the text the JSONL and memory
  stores scan. Each candidate FTS5 returns is checked again with
  :meth:`~sessiontree.searchtext.SearchQuery.matches` before it becomes a hit,
  pending entries are matched by that same rule, and the fold of
  :mod:`sessiontree.searchtext` is FTS5's own, so the index neither adds nor
  loses a hit (the conformance test runs every store, and a SQLite store whose
  entries are all pending, opened read-only).
* **Every user token is quoted**: the MATCH expression is built by
  :meth:`~sessiontree.searchtext.SearchQuery.fts_expression`, so no query can
  reach FTS5's syntax (``-``, ``*``, ``NEAR``, ``:``, ``"``, ``AND``).

Schema (steps ``m004_search_index``, ``m005_search_pending``)::

    search_entries(rowid, session_id, seq, entry_id, type, role, ts_ms, text)
    search_fts USING fts5(text, content='search_entries', tokenize='trigram case_sensitive 0')
    search_merged(session_id PRIMARY KEY, seq)   -- entries with seq <= this are merged
    search_state(updated_at)                     -- sessions.updated_at of the last full merge

**The pending tail** (issue 13: "appends stay within 10% of their speed before
the index"). FTS5 trigram costs about 0.65 ms of CPU per 2 KB message in a
one-row transaction and 0.18 ms in bulk, while a whole batched append costs
0.04-0.07 ms per message without the index: no FTS5 work can stay in an
append and meet the target, even amortised. So:

* **An append writes nothing** for search (one primary-key lookup of its
  session's watermark). Its entries are pending.
* **Merges are bulk**, one FTS5 insert for many entries: when a session is
  created (import, fork, a new agent session), replaced or rebuilt, its own
  entries and every pending entry of the store are merged in that write's
  transaction; :func:`merge_store` does it on demand; and an append leaving
  more than :data:`MAX_PENDING` (2,048) pending entries in its session merges
  them all (the backstop bounding a query's scan).
* **Queries** find pending entries by scanning them (sessions written since
  the last full merge: ``sessions.updated_at > search_state.updated_at``, an
  index range, then entries after each watermark; JSON parsed, text
  extracted, matched by the rule). Read-only opens never write: they only scan.
  About 50 us per 2 KB pending entry, so a 2,048-entry tail adds ~0.1 s.
* **Order.** Pending hits first, ranked among themselves by
  :func:`~sessiontree.searchtext.scan_score` (they are the newest activity, and
  bm25 cannot score an entry FTS5 does not hold), then merged hits by bm25. For
  queries made only of short terms every hit is ranked by ``scan_score``, as
  after a rebuild. After any merge of everything (a rebuild, a creation,
  :func:`merge_store`) the ranks equal those of a fresh rebuild exactly; the
  Hypothesis test checks that, and that the hit set before the merge is the
  rebuild's.

Measured (``benchmarks/bench_search_append.py``, 1,000 messages of ~2 KB,
interleaved with/without the index in one process; CPU time ratios, the
machine being shared; two runs): per call durable 2.43 -> 0.91-0.93, per call
``synchronous=normal`` 4.13 -> 1.07-1.14 (wall 1.04-1.05), 100 per transaction
4.58 -> 0.96-1.08, one transaction 4.95 -> 0.97-1.02. The work moved to the merge: ~0.5 ms per 2 KB
entry (parse, extract, insert, FTS5), paid once, in bulk.

Design, and the measurements that chose it (docs/search.md has the full
table; code-heavy text, i.e. the benchmark corpus and the real sessions):

* **trigram, not unicode61 or porter.** Sessions are code, paths, logs and
  identifiers, and people search for exact pieces of them. Only ``trigram``
  finds substrings (``dedup`` inside ``_dedup_ids``, ``parse_ts`` inside a
  path) and text without spaces (CJK): on code-heavy text unicode61 found
  240 of 667 true matches of ``dedup``, and porter stemming answered
  ``parsing`` with 1,927 hits for 289 true ones. Trigram's price is size
  (about 2.5x a unicode61 index) and coarser ranking (bm25 over trigrams
  rewards rare trigrams, not rare words). We take exactness: a hit list that
  misses the session you fixed X in is the failure this feature exists to
  prevent; the rank only orders what is found.
* **Short terms fall back to a scan.** A trigram index cannot answer a term
  of one or two characters (FTS5 silently returns nothing). Terms of three or
  more characters go to FTS5; shorter ones are checked on its candidates;
  a query made only of short terms scans ``search_entries.text`` (it still
  works, at scan speed).
* **External content, text stored once.** The FTS5 table keeps only its
  index (``content='search_entries'``); the extracted text lives once, in
  ``search_entries``, which snippets, the verification of candidates and the
  short-term scan read. A default FTS5 table would keep a second copy; a
  contentless one would force every snippet and every short-term query to
  re-parse entry JSON, and its rows could not be deleted on SQLite 3.40
  without re-extracting their text. The entries' JSON still holds the text in
  escaped form: that copy is the truth, this one is derived.
* **FTS5 options, measured** (1,000 messages, 1.53 M characters; CPU ms for
  one-row transactions / 100 rows / all in one): ``detail=full`` 645 / 221 /
  183, ``detail=column`` 617 / 164 / 141, ``detail=none`` 545 / 138 / 99,
  ``detail=none, columnsize=0`` 402 / 105 / 64. Kept ``detail=full``: with
  the pending tail no append pays any of it, the merge is bulk already, and
  ``none`` would lose phrase matching in C (every trigram of a term ANDed
  instead, candidates checked in Python) and ``columnsize=0`` the document
  lengths bm25 reads. ``automerge``/``crisismerge`` matter for many small
  transactions, which merges no longer make.
* **Ranking** of merged entries: ``bm25(search_fts)`` ascending (``rank = -bm25``,
  higher is better), ties broken newest first, then by session and entry id.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .. import jsonio
from ..searchtext import (
    SearchFilters,
    SearchHit,
    SearchQuery,
    entry_text,
    fold,
    make_filters,
    parse_query,
    scan_score,
)
from ._search_scan import (
    SessionFacts,
    active_ids,
    check_limit,
    make_hit,
    scan_store,
    title_of,
    top_hits,
)
from ._shared import cwd_matches
from .sqlite import _STATE_SQL, DERIVED_INDEXES, _db, _py, _state_from_row, migration

if TYPE_CHECKING:
    from .sqlite import SqliteStore

__all__ = [
    "INDEX",
    "MAX_PENDING",
    "TOKENIZER",
    "SearchIndex",
    "m004_search_index",
    "m005_search_pending",
    "merge_pending",
    "merge_store",
    "search_store",
]

#: The FTS5 tokenizer of ``search_fts`` (see the module docstring for why).
TOKENIZER = "trigram case_sensitive 0"

_INSERT = ("INSERT INTO search_entries (session_id, seq, entry_id, type, role, ts_ms, text)"
           " VALUES (?, ?, ?, ?, ?, ?, ?)")

#: An append leaving more than this many unmerged entries in its session merges
#: every pending entry of the store (the backstop bounding the tail a query scans).
MAX_PENDING = 2048


def _parsed(conn: sqlite3.Connection, key: Any, after: int) -> list[tuple[int, dict[str, Any]]]:
    """Entries of session ``key`` with ``seq > after``, parsed (damaged records skipped:
    ``load()`` reports them, ``reindex()`` refuses them)."""
    out = []
    for seq, text in conn.execute("SELECT seq, json FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq",
                                  (key, after)):
        try:
            entry = jsonio.loads(text)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("type"), str):
            out.append((seq, entry))
    return out


def _text_rows(key: Any, rows: Iterable[tuple[int, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    out = []
    for seq, entry in rows:
        found = entry_text(entry)
        if found is not None:
            out.append((key, seq, _db(entry["id"]), _db(entry["type"]), _db(found.role), found.ts_ms, found.text))
    return out


def _watermark(conn: sqlite3.Connection, key: Any) -> int | None:
    row = conn.execute("SELECT seq FROM search_merged WHERE session_id = ?", (key,)).fetchone()
    return None if row is None else row[0]


def _merge(conn: sqlite3.Connection, work: Iterable[tuple[Any, int, list[tuple[int, dict[str, Any]]]]]) -> int:
    """Move pending entries into the index: ``work`` is ``(key, last_seq, parsed rows)``
    per session (rows after its watermark, up to ``last_seq``). The text goes into
    ``search_entries`` and then, for every session at once, into FTS5 with one
    statement: FTS5's cost is mostly per statement and per transaction (segment
    writes), so one bulk insert is far cheaper than one per entry. Returns the number
    of entries with text merged."""
    first = conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM search_entries").fetchone()[0]
    count = 0
    for key, last, rows in work:
        out = _text_rows(key, rows)
        if out:
            conn.executemany(_INSERT, out)
            count += len(out)
        conn.execute("INSERT INTO search_merged (session_id, seq) VALUES (?, ?)"
                     " ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq", (key, last))
    if count:
        # External content: FTS5 indexes the rows just written (rowids only grow), so
        # FTS5 and search_entries cannot disagree.
        conn.execute("INSERT INTO search_fts (rowid, text) SELECT rowid, text FROM search_entries"
                     " WHERE rowid >= ?", (first,))
    return count


def merge_pending(conn: sqlite3.Connection) -> int:
    """Merge every pending entry of the store into FTS5 (inside a write transaction).

    The sessions that can hold pending entries are those written since the last
    full merge (``sessions.updated_at`` above ``search_state.updated_at``, an
    index range); afterwards that mark moves to the newest session. Returns the
    number of entries with text merged."""
    mark = conn.execute("SELECT updated_at FROM search_state").fetchone()[0]
    dirty = conn.execute("SELECT s.id, coalesce(m.seq, -1) FROM sessions AS s"
                         " LEFT JOIN search_merged AS m ON m.session_id = s.id"
                         " WHERE s.updated_at > ? ORDER BY s.updated_at", (mark,)).fetchall()
    work = []
    for key, after in dirty:
        rows = _parsed(conn, key, after)
        if rows:
            work.append((key, rows[-1][0], rows))
    merged = _merge(conn, work)
    conn.execute("UPDATE search_state SET updated_at = (SELECT coalesce(max(updated_at), 0) FROM sessions)")
    return merged


class SearchIndex:
    """The search index as a :class:`~sessiontree.stores.sqlite.DerivedIndex`: merged
    entries in FTS5, appended ones pending until the next merge (module docstring)."""

    name = "search"

    def add(self, conn: sqlite3.Connection, key: Any, rows: Sequence[tuple[int, dict[str, Any], bytes]]) -> None:
        """Index new entries of session ``key`` (inside the writing transaction).

        A session without a watermark (just created, replaced, or rebuilt by
        ``reindex``: :meth:`remove` dropped it) is merged at once, with every
        other pending entry of the store: bulk writes pay for their index in their
        own transaction. An append to an indexed session writes nothing: its
        entries stay pending (found by the scan of the tail) until a merge, or
        until the session has more than :data:`MAX_PENDING` of them."""
        mark = _watermark(conn, key)
        if mark is None:
            if rows and conn.execute("SELECT 1 FROM entries WHERE session_id = ? AND seq < ? LIMIT 1",
                                     (key, rows[0][0])).fetchone() is None:
                whole = [(seq, entry) for seq, entry, _ in rows]
            else:  # the rows do not start the session (or there are none): read it back
                whole = _parsed(conn, key, -1)
            _merge(conn, [(key, whole[-1][0] if whole else -1, whole)])
            merge_pending(conn)
        elif rows and rows[-1][0] - mark > MAX_PENDING:
            merge_pending(conn)

    def remove(self, conn: sqlite3.Connection, key: Any) -> None:
        """Drop session ``key`` from the index (inside the writing transaction); its
        pending entries are only entries, deleted with them."""
        # An external-content FTS5 table forgets a row only when told its old text.
        conn.execute("INSERT INTO search_fts (search_fts, rowid, text)"
                     " SELECT 'delete', rowid, text FROM search_entries WHERE session_id = ?", (key,))
        conn.execute("DELETE FROM search_entries WHERE session_id = ?", (key,))
        conn.execute("DELETE FROM search_merged WHERE session_id = ?", (key,))

    def settle(self, conn: sqlite3.Connection) -> int:
        """Merge every pending entry into FTS5 (:func:`merge_pending`); returns how many
        entries with text were merged."""
        return merge_pending(conn)


#: The registered instance (appended to :data:`~sessiontree.stores.sqlite.DERIVED_INDEXES`).
INDEX = SearchIndex()


@migration
def m004_search_index(conn: sqlite3.Connection) -> None:
    """The full-text index (issue 13), filled from every session already stored.

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
            -- searchtext.entry_text's role (NULL for session_info/session_summary).
            role TEXT,
            -- The entry's timestamp in ms (NULL when it does not parse), for since/until.
            ts_ms REAL,
            -- searchtext.entry_text's text: the one copy snippets and checks read.
            text TEXT NOT NULL,
            UNIQUE (session_id, seq)
        )""")
    conn.execute(f"CREATE VIRTUAL TABLE search_fts USING fts5(text, content='search_entries',"
                 f" content_rowid='rowid', tokenize='{TOKENIZER}')")
    keys = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowid")]
    for key in keys:
        conn.executemany(_INSERT, _text_rows(key, _parsed(conn, key, -1)))
    conn.execute("INSERT INTO search_fts (rowid, text) SELECT rowid, text FROM search_entries")


@migration
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


DERIVED_INDEXES.append(INDEX)


# -- queries ----------------------------------------------------------------------------------


def _has_index(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_fts'").fetchone() is not None


def _facts(conn: sqlite3.Connection, key: Any) -> SessionFacts:
    """Title, name, cwd and active branch of session ``key``, from columns (JSON parsed
    only for the header and for ``leaf`` records)."""
    row = conn.execute(f"SELECT header_json, {_STATE_SQL} FROM sessions WHERE id = ?", (key,)).fetchone()
    header = jsonio.loads(row[0])
    info = _state_from_row(row[1:])
    cwd = header.get("cwd") if isinstance(header, dict) else None
    last = conn.execute("SELECT id, type FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                        (key,)).fetchone()
    if last is None or _py(last[1]) != "leaf":
        # The common case: the last record is the leaf (tree.loaded_leaf_id); walk up a
        # parent map built in C (dict of rows), stopping when an id repeats (cycles).
        parents = dict(conn.execute("SELECT id, parent_id FROM entries WHERE session_id = ?", (key,)).fetchall())
        branch: set[Any] = set()
        current = last[0] if last is not None else None
        while current is not None and current not in branch and current in parents:
            branch.add(current)
            current = parents[current]
        return SessionFacts(_py(key), title_of(info), info.name, cwd if isinstance(cwd, str) else "",
                            frozenset(_py(entry_id) for entry_id in branch))
    entries: list[dict[str, Any]] = []
    for entry_id, parent, kind, leaf_json in conn.execute(
            "SELECT id, parent_id, type, CASE WHEN type = 'leaf' THEN json END FROM entries"
            " WHERE session_id = ? ORDER BY seq", (key,)):
        entry = {"id": _py(entry_id), "parentId": _py(parent), "type": _py(kind)}
        if leaf_json is not None:
            try:
                target = jsonio.loads(leaf_json)
            except ValueError:
                target = {}
            if isinstance(target, dict) and "targetId" in target:
                entry["targetId"] = target["targetId"]
        entries.append(entry)
    return SessionFacts(_py(key), title_of(info), info.name, cwd if isinstance(cwd, str) else "", active_ids(entries))


def _allowed(conn: sqlite3.Connection, filters: SearchFilters) -> set[Any] | None:
    """Session keys passing the session and cwd filters, or ``None`` for every session."""
    if filters.session is None and filters.cwd is None:
        return None
    if filters.session is not None:
        rows = conn.execute("SELECT id, cwd FROM sessions WHERE id = ?", (_db(filters.session),)).fetchall()
    else:
        rows = conn.execute("SELECT id, cwd FROM sessions").fetchall()
    return {key for key, cwd in rows if cwd_matches(_py(cwd), filters.cwd)}


def _pending(conn: sqlite3.Connection, query: SearchQuery, filters: SearchFilters,
             allowed: set[Any] | None) -> list[tuple[Any, str, str, str | None, float | None, str, float]]:
    """Matches among the pending entries (appended since their session's last merge),
    found by the scan's rule, scored by :func:`~sessiontree.searchtext.scan_score`."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_merged'").fetchone() is None:
        return []  # an older schema opened read-only: FTS5 holds every entry
    sql = ("SELECT s.id, coalesce(m.seq, -1) FROM sessions AS s LEFT JOIN search_merged AS m ON m.session_id = s.id"
           " WHERE s.updated_at > (SELECT updated_at FROM search_state)")
    params: list[Any] = []
    if filters.session is not None:
        sql += " AND s.id = ?"
        params.append(_db(filters.session))
    found = []
    for key, after in conn.execute(sql, params).fetchall():
        if allowed is not None and key not in allowed:
            continue
        for _, entry in _parsed(conn, key, after):
            text = entry_text(entry)
            if text is None or not filters.keeps(entry["type"], text.role, text.ts_ms):
                continue
            folded = fold(text.text)
            if query.matches(folded):
                found.append((key, entry["id"], entry["type"], text.role, text.ts_ms, text.text,
                              scan_score(folded, query)))
    return found


def _hits_from_index(conn: sqlite3.Connection, query: SearchQuery, filters: SearchFilters,
                     limit: int | None) -> list[SearchHit]:
    allowed = _allowed(conn, filters)
    if allowed is not None and not allowed:
        return []
    expression = query.fts_expression()
    pending = _pending(conn, query, filters, allowed)
    found: list[tuple[Any, str, str, str | None, float | None, str, float]] = []
    if expression is not None:
        # The best `limit` pending matches by hit_order's key, before snippets are made.
        pending.sort(key=lambda row: (-row[6], -(row[4] or 0.0), _py(row[0]), row[1]))
        pending_hits = _make_hits(conn, pending if limit is None else pending[:limit], query)
        wanted = None if limit is None else limit - len(pending_hits)
        if wanted == 0:
            return pending_hits
        where = " AND e.session_id = ?" if filters.session is not None else ""
        params: list[Any] = [expression] + ([_db(filters.session)] if filters.session is not None else [])
        # Best first, ties newest first then by ids: the order of searchtext.hit_order, so
        # stopping at `limit` keeps exactly the best hits.
        cursor = conn.execute(
            "SELECT e.rowid, e.session_id, e.entry_id, e.type, e.role, e.ts_ms, bm25(search_fts) AS score"
            " FROM search_fts JOIN search_entries AS e ON e.rowid = search_fts.rowid"
            f" WHERE search_fts MATCH ?{where}"
            " ORDER BY score, coalesce(e.ts_ms, 0) DESC, e.session_id, e.entry_id", params)
        text_of = conn.cursor()
        for rowid, key, entry_id, kind, role, ts_ms, score in cursor:
            if allowed is not None and key not in allowed:
                continue
            role, kind = _py(role), _py(kind)
            if not filters.keeps(kind, role, ts_ms):
                continue
            text = text_of.execute("SELECT text FROM search_entries WHERE rowid = ?", (rowid,)).fetchone()[0]
            # Short terms, and the guarantee that the index finds what a scan finds.
            if not query.matches(fold(text)):
                continue
            found.append((key, _py(entry_id), kind, role, ts_ms, text, -score))
            if wanted is not None and len(found) >= wanted:
                break
        cursor.close()
        # Pending entries first (the newest activity, ranked by scan_score among
        # themselves), then the merged ones in bm25 order (module docstring).
        return pending_hits + _make_hits(conn, found, query)
    # Only terms of one or two characters: trigrams cannot answer, scan the stored text.
    sql = "SELECT session_id, entry_id, type, role, ts_ms, text FROM search_entries WHERE 1"
    params = []
    if filters.session is not None:
        sql += " AND session_id = ?"
        params.append(_db(filters.session))
    for term in query.folded:
        if term.isascii():
            # A superset of the rule's matches, in C: SQLite's lower() folds ASCII only,
            # and the two non-ASCII code points folding to ASCII (U+017F, U+212A) are let
            # through; Python checks every row it returns.
            sql += " AND (instr(lower(text), ?) > 0 OR instr(text, char(383)) > 0 OR instr(text, char(8490)) > 0)"
            params.append(term)
    for key, entry_id, kind, role, ts_ms, text in conn.execute(sql, params):
        if allowed is not None and key not in allowed:
            continue
        role, kind = _py(role), _py(kind)
        if not filters.keeps(kind, role, ts_ms):
            continue
        folded = fold(text)
        if query.matches(folded):
            found.append((key, _py(entry_id), kind, role, ts_ms, text, scan_score(folded, query)))
    # Every hit scored by scan_score, merged or pending alike: the order a rebuild gives.
    return top_hits(_make_hits(conn, pending + found, query), limit)


def _make_hits(conn: sqlite3.Connection, found: Sequence[tuple[Any, str, str, str | None, float | None, str, float]],
               query: SearchQuery) -> list[SearchHit]:
    """Hits from ``(key, entry_id, type, role, ts_ms, text, rank)`` rows, in their order."""
    facts: dict[Any, SessionFacts] = {}
    timestamps = _timestamps(conn, found)
    hits = []
    for key, entry_id, kind, role, _, text, rank in found:
        shared = facts.get(key)
        if shared is None:
            shared = facts[key] = _facts(conn, key)
        hits.append(make_hit(shared, entry_id, kind, timestamps.get((key, entry_id)), text, role, query, rank))
    return hits


def _timestamps(conn: sqlite3.Connection, found: Iterable[tuple[Any, ...]]) -> dict[tuple[Any, str], str]:
    """The stored ``timestamp`` string of each found entry (a hit shows it as written)."""
    out = {}
    for key, entry_id, *_ in found:
        row = conn.execute("SELECT timestamp FROM entries WHERE session_id = ? AND id = ?",
                           (key, _db(entry_id))).fetchone()
        if row is not None:
            out[(key, entry_id)] = _py(row[0])
    return out


def search_store(store: SqliteStore, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
                 since: Any = None, until: Any = None, session: str | None = None,
                 limit: int | None = 50) -> list[SearchHit]:
    """:meth:`SqliteStore.search <sessiontree.stores.sqlite.SqliteStore.search>`: one read snapshot.

    A database without the index (an older schema opened read-only) is
    searched by loading and scanning every session, with the same result.

    Raises:
        SearchQueryError, ValueError: see :meth:`SessionStore.search`.
        StorageError: the database could not be read.
    """
    parsed = parse_query(query)
    filters = make_filters(cwd=cwd, roles=roles, since=since, until=until, session=session)
    limit = check_limit(limit)
    with store._read() as conn:
        if not store._ready(conn):
            return []
        if _has_index(conn):
            return _hits_from_index(conn, parsed, filters, limit)
    return scan_store(store, parsed, filters, limit)


def merge_store(store: SqliteStore) -> int:
    """Merge every pending entry of ``store`` into FTS5 now, in one write transaction
    (what a session creation, a ``reindex`` or the :data:`MAX_PENDING` backstop also
    do). Queries give the same hits before and after; afterwards they rank every hit
    by bm25, exactly as after a rebuild. Returns the number of entries with text merged.

    Raises:
        StorageError: the store is read-only or the write failed (nothing changed).
    """
    with store._write("merge the search index") as conn:
        return INDEX.settle(conn)
