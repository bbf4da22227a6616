"""The SQLite full-text index: FTS5 ``trigram`` over the text of every entry.

Invariants:

* **Derived data** (docs/stores.md): :class:`SearchIndex` is a
  :class:`~sessiontree.stores.sqlite.derived.DerivedIndex`. What it holds is a pure
  function of the entries, kept in their transactions: every entry is either
  *merged* (its row in ``search_entries``, its trigrams in FTS5) or *pending* (after its
  session's watermark in ``search_merged``), and a query answers from both.
  It is never stale; ``store.reindex()`` rebuilds it from the entries alone.
* **The same hits as a scan.** The indexed text of an entry is exactly
  :func:`sessiontree.core.search.entry_text`, the text the JSONL and memory
  stores scan. Each candidate FTS5 returns is checked again with
  :meth:`~sessiontree.core.search.SearchQuery.matches` before it becomes a hit,
  pending entries are matched by that same rule, and the fold of
  :mod:`sessiontree.core.search` is FTS5's own, so the index neither adds nor
  loses a hit (the conformance test runs every store, and a SQLite store whose
  entries are all pending, opened read-only).
* **Every user token is quoted**: the MATCH expression is built by
  :meth:`~sessiontree.core.search.SearchQuery.fts_expression`, so no query can
  reach FTS5's syntax (``-``, ``*``, ``NEAR``, ``:``, ``"``, ``AND``).

Tables (schema steps ``m004_search_index``, ``m005_search_pending``,
``m008_search_branch`` and ``m014_contentless_search`` in :mod:`.schema`)::

    search_entries(rowid, session_id, seq, entry_id, type, role, ts_ms, chars)
    search_fts USING fts5(text, content='', detail=none, columnsize=0,
                          tokenize='trigram case_sensitive 0')
    search_merged(session_id PRIMARY KEY, seq)   -- entries with seq <= this are merged
    search_state(updated_at)                     -- sessions.updated_at of the last full merge
    search_off_branch(rowid PRIMARY KEY)         -- merged entries off their active branch

**Hits in bulk.** Building a hit needs its session's title and whether the
entry is on the active branch; walking each hit session's tree at query time
would cost time per entry of the session. So ``search_off_branch`` keeps, as
derived data, the merged entries that are *off* the active branch of their
session's records up to its watermark (kept by :func:`_merge`: unchanged when
the merged records only extend the branch, recomputed for the session
otherwise). A query trusts those marks for sessions with nothing pending and
walks the tree of the others; titles, watermarks, marks and timestamps are each
read for all hits in one statement (:func:`_make_hits`).

**The pending tail.** FTS5 work costs far more per entry than an append, so no
write does any:

* **No write merges.** Appends, creations (import, fork, a new agent session),
  replacements run no search statement at all: their entries are pending,
  found through ``sessions.updated_at``, which every write moves above the
  mark of the last full merge (a delete moves that mark down with it,
  :meth:`SearchIndex.remove`; ``reindex`` merges what it rebuilt).
* **Merges are bulk, off the write path,** one FTS5 insert for many entries,
  in transactions of about :data:`~sessiontree.stores.sqlite.maintenance.SETTLE_BUDGET`
  records (the longest a merge holds the write lock): ``store.settle_derived()``
  (called by the CLI's ``import`` and by ``sync`` at their end), ``reindex``
  (:meth:`SearchIndex.reindexed`), and a search finding more than
  :data:`MAX_PENDING` pending records on a writable store
  (:func:`settle_if_due`; ``store.settle_search_tail()``, which the CLI's
  read-only ``search`` calls, does it through a second, writable handle;
  bounded, as it only speeds up a read: the tail it found, waiting at most
  :data:`SETTLE_TIMEOUT` for another writer's lock). :func:`merge_store`
  merges in one transaction.
* **Queries** find pending entries by scanning them (sessions written since
  the last full merge: ``sessions.updated_at > search_state.updated_at``, an
  index range, then entries after each watermark; JSON parsed, text
  extracted, matched by the rule). Read-only opens never write: they only scan.
* **Order.** Pending hits first, ranked among themselves by
  :func:`~sessiontree.core.search.scan_score` (they are the newest activity,
  and the index does not hold them), then merged hits shortest text first.
  For queries made only of short terms every hit is ranked by ``scan_score``,
  as after a rebuild. After any merge of everything (a rebuild, a settle,
  :func:`merge_store`) the ranks equal those of a fresh rebuild exactly; the
  Hypothesis test checks that, and that the hit set before the merge is the
  rebuild's.

Design (docs/search.md has the reasons and the measurements that chose it):

* **trigram, not unicode61 or porter**: sessions are code, paths, logs and
  identifiers, and only ``trigram`` finds substrings and text without spaces.
* **Short terms fall back to a scan.** A trigram index cannot answer a term
  of one or two characters (FTS5 silently returns nothing). Terms of three or
  more characters go to FTS5; shorter ones are checked on its candidates;
  a query made only of short terms scans the records, prefiltered in C
  (:func:`record_prefilter`).
* **Text stored once** (docs/decisions/contentless-search.md). FTS5 is
  contentless (``content=''``) and keeps only which rows hold which trigram
  (``detail=none``, no positions, no column sizes): a sixth of the index with
  positions, and half its build time. The text of an entry lives in its record
  only: a query extracts it again (:func:`~sessiontree.core.search.entry_text`
  on ``entries.json``) for each candidate it checks and each snippet, and a
  removal extracts it to tell FTS5 what to forget.
* **A term is all its trigrams.** ``detail=none`` answers no phrase, so a term
  of ``n`` characters becomes the AND of its trigrams
  (:meth:`~sessiontree.core.search.SearchQuery.fts_expression`): a superset of
  the entries holding it, every one checked by the rule.
* **Ranking** of merged entries: shortest text first (``search_entries.chars``),
  ties newest first, then by session and entry id; ``rank`` is the sum of the
  term lengths over ``chars + 200``, :func:`~sessiontree.core.search.scan_score`
  of a text holding each term once. With no term frequency in the index this is
  what bm25 itself would order by (its other factor, the terms' rarity, is the
  same for every hit of a query); FTS5's ``bm25()`` returns 0 on such a table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from sessiontree.core.search import (
    SearchQuery,
    entry_text,
    fold,
)
from sessiontree.errors import StorageError
from sessiontree.format import jsonio
from sessiontree.stores.search import (
    active_ids,
)
from sessiontree.stores.sqlite.derived import SqliteTransactions, from_db, to_db
from sessiontree.stores.verify import row_drift

__all__ = [
    "INDEX",
    "MAX_PENDING",
    "SETTLE_TIMEOUT",
    "TOKENIZER",
    "SearchIndex",
    "branch_ids",
    "fill_index",
    "has_text_column",
    "mark_off_branch_everywhere",
    "matching",
    "merge_pending",
    "merge_store",
    "parsed_records",
    "pending_records",
    "settle_if_due",
    "table_names",
]

#: The FTS5 tokenizer of ``search_fts`` (see the module docstring for why).
TOKENIZER = "trigram case_sensitive 0"

_INSERT_ROWID = ("INSERT INTO search_entries (rowid, session_id, seq, entry_id, type, role, ts_ms, chars)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_INSERT_FTS = "INSERT INTO search_fts (rowid, text) VALUES (?, ?)"

#: A search on a writable store that finds more pending records than this merges
#: them first (:func:`search_store`): the bound on the tail a query scans, paid by
#: the reader that would otherwise scan it, never by a write.
MAX_PENDING = 2048

#: Seconds the merge of a search (:func:`settle_if_due`) waits for another writer's
#: lock before it gives up and the query scans the tail: short, as that merge is
#: only an optimisation of the read.
SETTLE_TIMEOUT = 0.5


def parsed_records(conn: sqlite3.Connection, key: Any, after: int,
            limit: int | None = None) -> tuple[list[tuple[int, dict[str, Any]]], int, int]:
    """Entries of session ``key`` with ``seq > after`` (the first ``limit`` records when
    given), parsed; damaged records are skipped (``load()`` reports them, ``reindex()``
    refuses them). Returns ``(rows, last, count)``: the parsed ``(seq, entry)`` pairs,
    the seq of the last record read (``after`` when none) and how many were read, so a
    merge moves its watermark past damaged records too."""
    out = []
    last, count = after, 0
    bound = "" if limit is None else f" LIMIT {int(limit)}"
    for seq, text in conn.execute("SELECT seq, json FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq"
                                  + bound, (key, after)):
        last, count = seq, count + 1
        try:
            entry = jsonio.loads(text)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("type"), str):
            out.append((seq, entry))
    return out, last, count


def _text_rows(key: Any, rows: Iterable[tuple[int, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    out = []
    for seq, entry in rows:
        found = entry_text(entry)
        if found is not None:
            entry_id, kind, role = entry["id"], entry["type"], found.role
            # to_db only changes non-ASCII strings: most ids, types and roles skip the calls.
            # (A record damaged by hand may hold other values: those take to_db too.)
            if not (entry_id.__class__ is str and entry_id.isascii() and kind.__class__ is str and kind.isascii()
                    and (role is None or role.isascii())):
                entry_id, kind, role = to_db(entry_id), to_db(kind), to_db(role)
            out.append((key, seq, entry_id, kind, role, found.ts_ms, found.text))
    return out


def _entry_text_of(data: Any) -> str | None:
    """The indexed text of a stored record (``entries.json``): what :func:`_text_rows`
    gave FTS5 when it was merged (records never change, and :func:`entry_text` is a
    pure function); ``None`` when the record no longer parses or has no text."""
    try:
        entry = jsonio.loads(data)
    except ValueError:
        return None
    if not (isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("type"), str)):
        return None
    found = entry_text(entry)
    return None if found is None else found.text


def matching(query: SearchQuery, data: Any) -> tuple[str, str] | None:
    """``(text, folded text)`` of the stored record ``data`` (``entries.json``, or ``None``
    when the row is gone) when its indexed text matches ``query`` by the rule
    (docs/search.md, "Matching"), else ``None``: also for a record deleted or damaged
    by hand since its merge, which has nothing left to match."""
    text = None if data is None else _entry_text_of(data)
    if text is None:
        return None
    folded = fold(text)
    return (text, folded) if query.matches(folded) else None


def _merged_texts(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> tuple[list[tuple[int, str]], bool]:
    """``(rowid, text)`` of the ``search_entries`` rows ``where`` selects (a condition on
    ``e``), their texts re-extracted from the entries (the index does not store them),
    and whether every one was found (a record deleted or damaged by hand since its
    merge has lost the text FTS5 needs to forget it)."""
    out: list[tuple[int, str]] = []
    complete = True
    for rowid, data in conn.execute(
            "SELECT e.rowid, en.json FROM search_entries AS e"
            " LEFT JOIN entries AS en ON en.session_id = e.session_id AND en.seq = e.seq"
            f" WHERE {where}", params):
        text = None if data is None else _entry_text_of(data)
        if text is None:
            complete = False
        else:
            out.append((rowid, text))
    return out, complete


def rebuild_fts(conn: sqlite3.Connection) -> None:
    """Empty FTS5 and index again the text of every ``search_entries`` row, re-extracted
    from the entries (``reindex`` of everything; a removal whose old texts are lost).
    A row whose record no longer has a text is dropped with its off-branch mark."""
    conn.execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
    texts, complete = _merged_texts(conn, "1", ())
    if not complete:
        kept = {rowid for rowid, _ in texts}
        gone = [(rowid,) for rowid, in conn.execute("SELECT rowid FROM search_entries") if rowid not in kept]
        conn.executemany("DELETE FROM search_off_branch WHERE rowid = ?", gone)
        conn.executemany("DELETE FROM search_entries WHERE rowid = ?", gone)
    conn.executemany(_INSERT_FTS, texts)


def branch_ids(conn: sqlite3.Connection, key: Any, upto: int | None = None) -> frozenset[str]:
    """Ids of the entries on the active branch of session ``key`` (root to the leaf
    :func:`~sessiontree.core.tree.loaded_leaf_id` gives), counting only records with
    ``seq <= upto`` when given. Read from the ``id``/``parent_id``/``type`` columns
    (JSON parsed only for ``leaf`` records), so a record whose JSON is damaged still
    counts, as it does in the tree of ``load()``'s columns."""
    bound, params = ("", (key,)) if upto is None else (" AND seq <= ?", (key, upto))
    last = conn.execute(f"SELECT id, type FROM entries WHERE session_id = ?{bound} ORDER BY seq DESC LIMIT 1",
                        params).fetchone()
    if last is None or from_db(last[1]) != "leaf":
        # The common case: the last record is the leaf (tree.loaded_leaf_id); walk up a
        # parent map built in C (dict of rows), stopping when an id repeats (cycles).
        parents = dict(conn.execute(f"SELECT id, parent_id FROM entries WHERE session_id = ?{bound}",
                                    params).fetchall())
        branch: set[Any] = set()
        current = last[0] if last is not None else None
        while current is not None and current not in branch and current in parents:
            branch.add(current)
            current = parents[current]
        return frozenset(from_db(entry_id) for entry_id in branch)
    entries: list[dict[str, Any]] = []
    for entry_id, parent, kind, leaf_json in conn.execute(
            "SELECT id, parent_id, type, CASE WHEN type = 'leaf' THEN json END FROM entries"
            f" WHERE session_id = ?{bound} ORDER BY seq", params):
        entry = {"id": from_db(entry_id), "parentId": from_db(parent), "type": from_db(kind)}
        if leaf_json is not None:
            try:
                target = jsonio.loads(leaf_json)
            except ValueError:
                target = {}
            if isinstance(target, dict) and "targetId" in target:
                entry["targetId"] = target["targetId"]
        entries.append(entry)
    return active_ids(entries)


def _mark_off_branch(conn: sqlite3.Connection, key: Any, branch: frozenset[str],
                     rows: Iterable[tuple[int, Any]] | None = None) -> None:
    """Record which merged entries of session ``key`` are off its active ``branch``
    (``search_off_branch``, see :func:`~sessiontree.stores.sqlite.schema.m008_search_branch`).
    ``rows``: the session's ``(rowid, entry_id)`` pairs in ``search_entries`` when the caller has them (all of
    them: the session's previous marks are replaced); read back when ``None``."""
    conn.execute("DELETE FROM search_off_branch WHERE rowid IN"
                 " (SELECT rowid FROM search_entries WHERE session_id = ?)", (key,))
    if rows is None:
        rows = conn.execute("SELECT rowid, entry_id FROM search_entries WHERE session_id = ?", (key,)).fetchall()
    off = [(rowid,) for rowid, entry_id in rows if from_db(entry_id) not in branch]
    if off:
        conn.executemany("INSERT INTO search_off_branch (rowid) VALUES (?)", off)


def _extends_branch(conn: sqlite3.Connection, key: Any, after: int, last: int) -> bool:
    """Whether the records of session ``key`` with ``after < seq <= last`` only extend
    the active branch the records up to ``after`` give: the record at ``after`` is an
    ordinary entry (so it was the leaf), and each new record is an ordinary entry whose
    parent is the record before it. Then the branch is the old one plus the new
    records (ids are unique in a session), and no merged entry's flag changes."""
    row = conn.execute("SELECT id, type FROM entries WHERE session_id = ? AND seq = ?", (key, after)).fetchone()
    if row is None or from_db(row[1]) == "leaf":
        return False
    previous = row[0]
    for entry_id, parent, kind in conn.execute(
            "SELECT id, parent_id, type FROM entries WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
            (key, after, last)):
        if parent != previous or from_db(kind) == "leaf":
            return False
        previous = entry_id
    return True


_Work = tuple[Any, int, int, list[tuple[int, dict[str, Any]]], "frozenset[str] | None"]


def _merge(conn: sqlite3.Connection, work: Iterable[_Work]) -> int:
    """Move pending entries into the index: ``work`` is ``(key, after, last, parsed rows,
    branch)`` per session: its watermark before (``-1``: nothing merged), the seq to
    merge up to, the parsed rows in between, and its active branch as of ``last`` when
    the caller knows it (``None``: worked out here). The text goes into
    ``search_entries`` and then, for every session at once, into FTS5 with one
    statement: FTS5's cost is mostly per statement and per transaction (segment
    writes), so one bulk insert is far cheaper than one per entry. The off-branch marks
    are kept as of ``last`` (:func:`~sessiontree.stores.sqlite.schema.m008_search_branch`):
    unchanged when the new records only extend the branch (appends do), recomputed
    for the session otherwise.
    Returns the number of entries with text merged."""
    first: int = conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM search_entries").fetchone()[0]
    rowid = first
    texts: list[tuple[int, str]] = []
    for key, after, last, rows, branch in work:
        out = _text_rows(key, rows)
        if out:
            # Explicit rowids (the next free ones), so the new rows' ids are known
            # without reading them back.
            conn.executemany(_INSERT_ROWID, [(rowid + offset, *row[:6], len(row[6]))
                                             for offset, row in enumerate(out)])
            texts.extend((rowid + offset, row[6]) for offset, row in enumerate(out))
        new = [(rowid + offset, row[2]) for offset, row in enumerate(out)]
        rowid += len(out)
        if last > after:
            if after < 0:  # nothing merged before: the new rows are all the session's rows
                _mark_off_branch(conn, key, branch if branch is not None else branch_ids(conn, key, last), new)
            elif not _extends_branch(conn, key, after, last):
                _mark_off_branch(conn, key, branch_ids(conn, key, last))
        conn.execute("INSERT INTO search_merged (session_id, seq) VALUES (?, ?)"
                     " ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq", (key, last))
    if texts:
        # Contentless: FTS5 keeps only the trigrams of each text, under its
        # search_entries rowid; the text itself is not stored anywhere.
        conn.executemany(_INSERT_FTS, texts)
    return rowid - first


def merge_pending(conn: sqlite3.Connection, budget: int | None = None) -> int:
    """Merge pending entries into FTS5 (inside a write transaction): every one, or
    about ``budget`` records (the first ones of the sessions written longest ago), so
    that a caller can settle a long tail in several short transactions and never
    hold the store's write lock for long (:data:`~sessiontree.stores.sqlite.maintenance.SETTLE_BUDGET`).

    The sessions that can hold pending entries are those written since the last
    full merge (``sessions.updated_at`` above ``search_state.updated_at``, an
    index range); once they are all merged that mark moves to the newest session.
    Returns the number of records the watermarks moved over (0: nothing was
    pending); fewer than ``budget`` means everything is merged."""
    mark = conn.execute("SELECT updated_at FROM search_state").fetchone()[0]
    dirty = conn.execute("SELECT s.id, coalesce(m.seq, -1) FROM sessions AS s"
                         " LEFT JOIN search_merged AS m ON m.session_id = s.id"
                         " WHERE s.updated_at > ? ORDER BY s.updated_at", (mark,)).fetchall()
    work: list[_Work] = []
    taken = 0
    for key, after in dirty:
        if budget is not None and taken >= budget:
            break
        rows, last, count = parsed_records(conn, key, after, None if budget is None else budget - taken)
        taken += count
        if count:
            work.append((key, after, last, rows, None))
    _merge(conn, work)
    if budget is None or taken < budget:
        conn.execute("UPDATE search_state SET updated_at = (SELECT coalesce(max(updated_at), 0) FROM sessions)")
    return taken


def pending_records(conn: sqlite3.Connection) -> int:
    """How many records are pending (after their session's watermark), from the
    sessions written since the last full merge: one index range and one
    primary-key probe per such session, no record read."""
    if "search_merged" not in table_names(conn):
        return 0
    count: int = conn.execute(
        "SELECT coalesce(sum((SELECT coalesce(max(seq), -1) FROM entries WHERE session_id = s.id)"
        " - coalesce(m.seq, -1)), 0) FROM sessions AS s LEFT JOIN search_merged AS m ON m.session_id = s.id"
        " WHERE s.updated_at > (SELECT updated_at FROM search_state)").fetchone()[0]
    return count


class SearchIndex:
    """The search index as a :class:`~sessiontree.stores.sqlite.derived.DerivedIndex`: merged
    entries in FTS5, written ones pending until the next merge (module docstring)."""

    name = "search"

    def add(self, conn: sqlite3.Connection, key: Any, rows: Sequence[tuple[int, dict[str, Any], bytes]]) -> None:
        """Nothing to write for new entries of session ``key``: no statement at all.
        They stay pending (found by the scan of the tail) until a merge (module
        docstring, "The pending tail"): the write moved the session's
        ``updated_at`` above the mark of the last full merge, which is how queries
        and merges find it. (``reindex`` keeps ``updated_at``; :meth:`reindexed`
        merges what it rebuilt in the same transaction.)"""

    def writes_on_add(self, conn: sqlite3.Connection) -> bool:
        """Never: new entries are always pending (:meth:`add` writes nothing)."""
        return False

    def created(self, conn: sqlite3.Connection, sessions: Sequence[tuple[Any, Sequence[dict[str, Any]]]]) -> None:
        """Merge sessions created in this transaction from their entries in hand
        (``(key, entries)``, every entry of the session, ``seq`` = position): what a
        settle writes for them, without reading or parsing a record again (a bulk
        import that settles as it writes, :meth:`SqliteWrites.create_many` with
        ``settle``). Their active branches come from the entries."""
        _merge(conn, [(key, -1, len(entries) - 1, list(enumerate(entries)), active_ids(entries))
                      for key, entries in sessions if entries])
        if pending_records(conn) == 0:
            # Nothing else pending either: the mark of the last full merge moves, as a
            # settle would move it, so queries do not walk these sessions for a tail.
            conn.execute("UPDATE search_state SET updated_at = (SELECT coalesce(max(updated_at), 0) FROM sessions)")

    def remove(self, conn: sqlite3.Connection, key: Any) -> None:
        """Drop session ``key`` from the index (inside the writing transaction); its
        pending entries are only entries, deleted with them.

        The mark of the last full merge never stays above every remaining session:
        if it did (the newest session deleted, then the clock stepping back), a
        later write's ``updated_at``, which only exceeds the stored ones, could
        fall at or below it and its entries would be missed."""
        conn.execute("DELETE FROM search_off_branch WHERE rowid IN"
                     " (SELECT rowid FROM search_entries WHERE session_id = ?)", (key,))
        # A contentless FTS5 table forgets a row only when told its old text, which is
        # the text of its record, extracted again.
        texts, complete = _merged_texts(conn, "e.session_id = ?", (key,))
        if complete:
            conn.execute("SAVEPOINT search_forget")
            try:
                conn.executemany("INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', ?, ?)", texts)
            except sqlite3.DatabaseError:
                # FTS5 does not hold what the rows say (damaged, or emptied by hand): rebuilt below.
                conn.execute("ROLLBACK TO search_forget")
                complete = False
            conn.execute("RELEASE search_forget")
        conn.execute("DELETE FROM search_entries WHERE session_id = ?", (key,))
        if not complete:
            rebuild_fts(conn)  # the old trigrams are unknown: index the other rows again
        conn.execute("DELETE FROM search_merged WHERE session_id = ?", (key,))
        conn.execute("UPDATE search_state SET updated_at = (SELECT coalesce(max(updated_at), 0) FROM sessions"
                     " WHERE id != ?) WHERE updated_at > (SELECT coalesce(max(updated_at), 0) FROM sessions"
                     " WHERE id != ?)", (key, key))

    def pending(self, conn: sqlite3.Connection) -> int:
        """Pending records (:func:`pending_records`)."""
        return pending_records(conn)

    def settle(self, conn: sqlite3.Connection, budget: int | None = None) -> int:
        """Merge pending entries into FTS5: all of them, or about ``budget`` records
        (:func:`merge_pending`); returns how many records were merged (fewer than
        ``budget``: nothing is left)."""
        return merge_pending(conn, budget)

    def reindexed(self, conn: sqlite3.Connection, everything: bool) -> None:
        """After ``store.reindex()`` rebuilt sessions (:meth:`remove`, then :meth:`add`,
        which writes nothing): merge them now, in the same transaction, so a rebuilt
        index holds every entry and ranks every hit as a settle does. A rebuilt session keeps
        its ``updated_at``, so it is found by its missing watermark, not by the mark."""
        if everything:
            # Every session was removed: FTS5 should be empty. Emptied for sure, so a
            # rebuild also repairs trigrams no row accounts for (a contentless table
            # cannot be compared with its rows).
            conn.execute("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
        work: list[_Work] = []
        for key, in conn.execute("SELECT id FROM sessions WHERE id NOT IN"
                                 " (SELECT session_id FROM search_merged)").fetchall():
            rows, last, count = parsed_records(conn, key, -1)
            if count:
                work.append((key, -1, last, rows, None))
        _merge(conn, work)
        merge_pending(conn)


    def checker(self, conn: sqlite3.Connection, key: Any) -> _SessionCheck:
        """The :class:`~sessiontree.stores.verify.DerivedCheck` of session ``key``'s
        ``search_entries`` rows (``check --store``): the rows a merge up to the
        session's watermark (``search_merged.seq``; none merged without a row) writes."""
        row = conn.execute("SELECT seq FROM search_merged WHERE session_id = ?", (key,)).fetchone()
        return _SessionCheck(conn, key, -1 if row is None else row[0])


class _SessionCheck:
    """:meth:`SearchIndex.checker`: the rebuilt rows are computed as the entries come."""

    def __init__(self, conn: sqlite3.Connection, key: Any, watermark: int) -> None:
        self.conn, self.key, self.watermark = conn, key, watermark
        self.rows: list[int] = []

    def add(self, seq: int, entry: dict[str, Any]) -> None:
        if seq <= self.watermark:  # later entries are pending: not in search_entries yet
            # Hashes, not rows: a session's texts can be hundreds of MB.
            self.rows.extend(hash((*row[:6], len(row[6]))) for row in _text_rows(self.key, [(seq, entry)]))

    def drift(self) -> list[str]:
        # The text is not stored (contentless FTS5): the rows are its metadata and its
        # length (a layout before m014_contentless_search, read-only, has the text).
        chars = "length(text)" if has_text_column(self.conn) else "chars"
        stored = [hash(tuple(row)) for row in self.conn.execute(
            f"SELECT session_id, seq, entry_id, type, role, ts_ms, {chars} FROM search_entries"
            " WHERE session_id = ? ORDER BY seq", (self.key,))]
        return row_drift("search_entries", stored, self.rows)


#: The search index (listed in :data:`~sessiontree.stores.sqlite.schema.DERIVED_INDEXES`).
INDEX = SearchIndex()


def fill_index(conn: sqlite3.Connection) -> None:
    """Put the text of every stored entry into ``search_entries`` and FTS5, in one
    bulk insert, in the layout of step ``m004_search_index`` (the step creating the
    index, on a store that has sessions; :func:`to_contentless` converts it)."""
    keys = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowid")]
    # The layout step m004 creates (to_contentless converts it afterwards).
    for key in keys:
        conn.executemany("INSERT INTO search_entries (session_id, seq, entry_id, type, role, ts_ms, text)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)", _text_rows(key, parsed_records(conn, key, -1)[0]))
    conn.execute("INSERT INTO search_fts (rowid, text) SELECT rowid, text FROM search_entries")


def table_names(conn: sqlite3.Connection) -> set[str]:
    """Which of the search tables the database holds (older schemas lack some)."""
    return {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE name IN ('search_fts', 'search_merged', 'search_off_branch')")}


def has_text_column(conn: sqlite3.Connection) -> bool:
    """Whether ``search_entries`` still has its ``text`` column (a layout before
    ``m014_contentless_search``, opened read-only: searched by scanning)."""
    return any(row[1] == "text" for row in conn.execute("PRAGMA table_info(search_entries)"))


def to_contentless(conn: sqlite3.Connection) -> None:
    """Schema step ``m014_contentless_search``: ``search_entries`` without its ``text``
    column and ``search_fts`` a contentless ``detail=none`` FTS5 table over the same
    rowids (so ``search_off_branch`` stays valid), filled from the old text. Does
    nothing when the layout is already the new one."""
    if not has_text_column(conn):
        return
    conn.execute("DROP TABLE IF EXISTS search_fts")
    conn.execute("ALTER TABLE search_entries RENAME TO search_entries_old")
    create_tables(conn)
    conn.execute("INSERT INTO search_entries (rowid, session_id, seq, entry_id, type, role, ts_ms, chars)"
                 " SELECT rowid, session_id, seq, entry_id, type, role, ts_ms, length(text) FROM search_entries_old")
    conn.execute("INSERT INTO search_fts (rowid, text) SELECT rowid, text FROM search_entries_old")
    conn.execute("DROP TABLE search_entries_old")


def create_tables(conn: sqlite3.Connection) -> None:
    """Create ``search_entries`` and ``search_fts`` in the layout of ``m014_contentless_search``
    (the docstring of :func:`~sessiontree.stores.sqlite.schema.m014_contentless_search`)."""
    conn.execute("""
        CREATE TABLE search_entries (
            -- Also the rowid of search_fts (contentless: FTS5 holds only the trigrams).
            rowid INTEGER PRIMARY KEY,
            -- sessions.id and entries.seq of the entry the text comes from: the text
            -- is core.search.entry_text of that record, extracted when a query needs it.
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            -- Copied from the entry for hits and filters, so a filter needs no JSON parse.
            entry_id TEXT NOT NULL,
            type TEXT NOT NULL,
            -- core.search.entry_text's role (NULL for session_info/session_summary).
            role TEXT,
            -- The entry's timestamp in ms (NULL when it does not parse), for since/until.
            ts_ms REAL,
            -- Code points of the text: merged hits are ranked shortest first.
            chars INTEGER NOT NULL,
            UNIQUE (session_id, seq)
        )""")
    conn.execute(f"CREATE VIRTUAL TABLE search_fts USING fts5(text, content='', detail=none, columnsize=0,"
                 f" tokenize='{TOKENIZER}')")
    conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', 16)")


def mark_off_branch_everywhere(conn: sqlite3.Connection) -> None:
    """Fill ``search_off_branch`` for every session, as of its watermark (the schema
    steps creating or refilling it)."""
    for key, mark in conn.execute("SELECT session_id, seq FROM search_merged WHERE seq >= 0").fetchall():
        branch = branch_ids(conn, key, mark)
        records = conn.execute("SELECT count(*) FROM entries WHERE session_id = ? AND seq <= ?",
                               (key, mark)).fetchone()[0]
        if len(branch) < records:  # something is off the branch (else no row to write)
            _mark_off_branch(conn, key, branch)




# -- queries ----------------------------------------------------------------------------------


def settle_if_due(store: SqliteTransactions, pending: int | None = None) -> int:
    """Merge the pending tail of a writable ``store`` when it holds more than
    :data:`MAX_PENDING` records (what a search does before it reads, so no query
    scans a long tail twice); returns the records merged (0: not due).

    Opportunistic, so bounded: the merge runs in transactions of about
    :data:`~sessiontree.stores.sqlite.maintenance.SETTLE_BUDGET` records, at most as many as the
    tail found here needs (records other writers add meanwhile are left pending:
    a search during a bulk import must not merge everything the import goes on
    writing), and each waits at most :data:`SETTLE_TIMEOUT` seconds for another
    writer's lock instead of the store's busy timeout (30 s by default: a search
    must not hang while an import or a reindex holds the lock). When it cannot
    write (the lock is held, a full disk), the answer is unchanged: the query
    scans the tail instead, so the error is not raised here.

    Args:
        store: a writable SQLite store.
        pending: its pending records when the caller has just counted them
            (:func:`pending_records`); ``None``: counted here.

    Raises:
        StorageError: the database could not be read.
    """
    if pending is None:
        with store.read_transaction() as conn:
            pending = pending_records(conn) if store.has_schema(conn) else 0
    if pending <= MAX_PENDING:
        return 0
    try:
        # The count just read bounds the settle (it need not count again).
        return store.settle_derived(lock_timeout=min(store.timeout, SETTLE_TIMEOUT), pending=pending)
    except StorageError:
        return 0  # the lock is held or the write failed: the query scans what is left


def merge_store(store: SqliteTransactions) -> int:
    """Merge every pending entry of ``store`` into FTS5 now, in one write transaction
    (``store.settle_derived()`` does the same in short ones; ``reindex`` merges what it
    rebuilds). Queries give the same hits before and after; afterwards they rank every
    merged hit shortest first, exactly as after a rebuild. Returns the number of records merged.

    Raises:
        StorageError: the store is read-only or the write failed (nothing changed).
    """
    with store.write_transaction("merge the search index") as conn:
        return INDEX.settle(conn)
