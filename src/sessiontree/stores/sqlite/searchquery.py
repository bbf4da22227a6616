"""Answering a search from SQLite's FTS5 index (:mod:`.search` keeps the index): the hits of
a query in one read snapshot, the pending tail scanned beside the merged rows, the
record prefilter, and :func:`search_store`, which ``SqliteStore.search`` calls. A database
without the index (an older schema opened read-only) is answered by scanning every
session (:func:`~sessiontree.stores.search.scan_store`), with the same hits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from sessiontree.core.search import (
    SearchFilters,
    SearchHit,
    SearchQuery,
    entry_text,
    fold,
    make_filters,
    parse_query,
    scan_score,
)
from sessiontree.format import jsonio
from sessiontree.stores.base import TimeBound
from sessiontree.stores.listing import cwd_matches
from sessiontree.stores.search import (
    ScannedStore,
    SessionFacts,
    check_limit,
    make_hit,
    scan_store,
    title_of,
)
from sessiontree.stores.sqlite.derived import STATE_SELECT, SqliteTransactions, from_db, state_from_row, to_db
from sessiontree.stores.sqlite.search import (
    branch_ids,
    has_text_column,
    matching,
    parsed_records,
    settle_if_due,
    table_names,
)

__all__ = ["SearchedStore", "record_prefilter", "search_store"]


#: A found entry before it becomes a hit: ``(key, seq, rowid, entry_id, type, role,
#: ts_ms, text, folded, rank)``; ``rowid`` is its ``search_entries`` row (``None`` when pending).
_Found = tuple[Any, int, "int | None", str, str, "str | None", "float | None", str, str, float]

#: Rows of a ``VALUES`` list or ``IN`` list per statement (well under SQLite's limits).
_CHUNK = 400


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


def _allowed(conn: sqlite3.Connection, filters: SearchFilters) -> set[Any] | None:
    """Session keys passing the session and cwd filters, or ``None`` for every session."""
    if filters.session is None and filters.cwd is None:
        return None
    if filters.session is not None:
        rows = conn.execute("SELECT id, cwd FROM sessions WHERE id = ?", (to_db(filters.session),)).fetchall()
    else:
        rows = conn.execute("SELECT id, cwd FROM sessions").fetchall()
    return {key for key, cwd in rows if cwd_matches(from_db(cwd), filters.cwd)}


def _pending(conn: sqlite3.Connection, query: SearchQuery, filters: SearchFilters,
             allowed: set[Any] | None, tables: set[str]) -> list[_Found]:
    """Matches among the pending entries (appended since their session's last merge),
    found by the scan's rule, scored by :func:`~sessiontree.core.search.scan_score`."""
    if "search_merged" not in tables:
        return []  # an older schema opened read-only: FTS5 holds every entry
    sql = ("SELECT s.id, coalesce(m.seq, -1) FROM sessions AS s LEFT JOIN search_merged AS m ON m.session_id = s.id"
           " WHERE s.updated_at > (SELECT updated_at FROM search_state)")
    params: list[Any] = []
    if filters.session is not None:
        sql += " AND s.id = ?"
        params.append(to_db(filters.session))
    found: list[_Found] = []
    for key, after in conn.execute(sql, params).fetchall():
        if allowed is not None and key not in allowed:
            continue
        for seq, entry in parsed_records(conn, key, after)[0]:
            text = entry_text(entry)
            if text is None or not filters.keeps(entry["type"], text.role, text.ts_ms):
                continue
            folded = fold(text.text)
            if query.matches(folded):
                found.append((key, seq, None, entry["id"], entry["type"], text.role, text.ts_ms, text.text, folded,
                              scan_score(folded, query)))
    return found


def _best_first(found: list[_Found], limit: int | None) -> list[_Found]:
    """``found`` in :func:`~sessiontree.core.search.hit_order`'s order (rank, then newer,
    then ids; ``ts_ms`` is the parsed ``timestamp`` that order reads), cut to ``limit``,
    before any hit is built."""
    found.sort(key=lambda row: (-row[9], -(row[6] or 0.0), from_db(row[0]), row[3]))
    return found if limit is None else found[:limit]


def _hits_from_index(conn: sqlite3.Connection, query: SearchQuery, filters: SearchFilters,
                     limit: int | None, tables: set[str]) -> list[SearchHit]:
    allowed = _allowed(conn, filters)
    if allowed is not None and not allowed:
        return []
    expression = query.fts_expression()
    pending = _pending(conn, query, filters, allowed, tables)
    found: list[_Found] = []
    if expression is not None:
        # The best `limit` pending matches by hit_order's key, before snippets are made.
        pending = _best_first(pending, limit)
        wanted = None if limit is None else limit - len(pending)
        if wanted == 0:
            return _make_hits(conn, pending, query, tables)
        where = " AND e.session_id = ?" if filters.session is not None else ""
        params: list[Any] = [expression] + ([to_db(filters.session)] if filters.session is not None else [])
        # Best first, ties newest first then by ids: the order of core.search.hit_order, so
        # stopping at `limit` keeps exactly the best hits. The index holds no text: each
        # candidate's record is read and its text extracted. With a limit per candidate
        # (below), not carried through the sort of every candidate; without one every
        # candidate is read anyway, so it comes with the row.
        record_column, record_join = ("en.json", " JOIN entries AS en ON en.session_id = e.session_id"
                                      " AND en.seq = e.seq") if wanted is None else ("NULL", "")
        cursor = conn.execute(
            "SELECT e.rowid, e.session_id, e.seq, e.entry_id, e.type, e.role, e.ts_ms, e.chars,"
            f" {record_column} FROM search_fts JOIN search_entries AS e ON e.rowid = search_fts.rowid{record_join}"
            f" WHERE search_fts MATCH ?{where}"
            " ORDER BY e.chars, coalesce(e.ts_ms, 0) DESC, e.session_id, e.entry_id", params)
        record_of = conn.cursor()
        once = sum(len(term) for term in query.folded)
        for rowid, key, seq, entry_id, kind, role, ts_ms, chars, data in cursor:
            if allowed is not None and key not in allowed:
                continue
            role, kind = from_db(role), from_db(kind)
            if not filters.keeps(kind, role, ts_ms):
                continue
            if data is None:
                row = record_of.execute("SELECT json FROM entries WHERE session_id = ? AND seq = ?",
                                        (key, seq)).fetchone()
                data = None if row is None else row[0]
            # A term is only "all its trigrams somewhere" to FTS5 (detail=none), and short
            # terms not even that: the rule decides, so the index finds what a scan finds.
            matched = matching(query, data)
            if matched is None:
                continue
            text, folded = matched
            # scan_score of a text holding each term once: decreasing in the length, as the order.
            found.append((key, seq, rowid, from_db(entry_id), kind, role, ts_ms, text, folded, once / (chars + 200)))
            if wanted is not None and len(found) >= wanted:
                break
        cursor.close()
        # Pending entries first (the newest activity, ranked by scan_score among
        # themselves), then the merged ones shortest first (module docstring).
        return _make_hits(conn, pending + found, query, tables)
    # Only terms of one or two characters: trigrams cannot answer, scan the records.
    sql = ("SELECT e.rowid, e.session_id, e.seq, e.entry_id, e.type, e.role, e.ts_ms, en.json"
           " FROM search_entries AS e JOIN entries AS en ON en.session_id = e.session_id AND en.seq = e.seq WHERE 1")
    params = []
    if filters.session is not None:
        sql += " AND e.session_id = ?"
        params.append(to_db(filters.session))
    for condition, values in record_prefilter(query.folded):
        sql += f" AND {condition}"
        params.extend(values)
    for rowid, key, seq, entry_id, kind, role, ts_ms, data in conn.execute(sql, params):
        if allowed is not None and key not in allowed:
            continue
        role, kind = from_db(role), from_db(kind)
        if not filters.keeps(kind, role, ts_ms):
            continue
        matched = matching(query, data)
        if matched is not None:
            text, folded = matched
            found.append((key, seq, rowid, from_db(entry_id), kind, role, ts_ms, text, folded,
                          scan_score(folded, query)))
    # Every hit scored by scan_score, merged or pending alike: the order a rebuild gives.
    return _make_hits(conn, _best_first(pending + found, limit), query, tables)


#: Characters of a float's ``repr`` (tool-call argument values, ``core.search._argument_parts``):
#: the one part of an entry's text that is not a substring of its JSON text.
_FLOAT_CHARS = frozenset("0123456789.e+-infa")
#: Characters JSON may write only escaped (``\"``, ``\\``, ``\/``, controls): a term holding
#: one is not found as written in the record.
_ESCAPED = frozenset('"\\/') | frozenset(map(chr, range(32))) | {"\x7f"}


def record_prefilter(terms: Iterable[str]) -> list[tuple[str, list[Any]]]:
    r"""SQL conditions on a stored record ``en.json`` (with their parameters) that every
    entry whose text holds all the folded ``terms`` passes: a superset, in C, of the
    rule's matches, for the scan of queries made only of short terms. Python checks
    every record that passes.

    Why a superset: a match lies inside one part of the text (parts are joined by a
    newline, which no term holds unless it is a control character, excluded below);
    a part is a JSON string value, a ``true``/``false``, an integer (the same digits as
    the JSON) or a float's ``repr`` (tool-call arguments only). For an ASCII term
    without a character JSON must escape, a string part holding it holds it in the
    record as written, up to case (SQLite's ``lower()`` folds A-Z) or one of the two
    code points folding into ASCII (U+017F, U+212A), unless some character of the
    record is written as a ``\u`` escape: those records pass. A term of float
    characters may come from a float argument: records with a tool call pass too.
    Terms that are not ASCII, or hold an escaped character, add no condition."""
    out: list[tuple[str, list[Any]]] = []
    for term in terms:
        if not term.isascii() or any(char in _ESCAPED for char in term):
            continue
        condition = ("(instr(lower(en.json), ?) > 0 OR instr(en.json, '\\u') > 0"
                     " OR instr(en.json, char(383)) > 0 OR instr(en.json, char(8490)) > 0")
        values: list[Any] = [term]
        if all(char in _FLOAT_CHARS for char in term):
            condition += " OR instr(en.json, '\"toolCall\"') > 0"
        out.append((condition + ")", values))
    return out


def _make_hits(conn: sqlite3.Connection, found: Sequence[_Found], query: SearchQuery,
               tables: set[str]) -> list[SearchHit]:
    """Hits from found rows, in their order, with a fixed number of statements per
    :data:`_CHUNK` hits: the sessions' titles and watermarks, the off-branch marks and
    the stored timestamps are each read for all hits at once. A session whose records
    all lie at or below its watermark (nothing pending) takes its active-branch flags
    from ``search_off_branch``; any other hit session has its tree walked
    (:func:`branch_ids`), as the marks may be stale there."""
    if not found:
        return []
    keys = list(dict.fromkeys(row[0] for row in found))
    marks = "search_off_branch" in tables and "search_merged" in tables
    facts: dict[Any, SessionFacts] = {}
    trusted: set[Any] = set()
    extra = (", coalesce(m.seq, -1), (SELECT max(seq) FROM entries WHERE session_id = s.id)"
             " FROM sessions AS s LEFT JOIN search_merged AS m ON m.session_id = s.id") if marks else \
        ", -1, NULL FROM sessions AS s"
    for chunk in _chunks(keys):
        for key, header_json, *state, mark, last in conn.execute(
                f"SELECT s.id, s.header_json, {', '.join('s.' + c for c in STATE_SELECT.split(', '))}{extra}"
                f" WHERE s.id IN ({', '.join('?' * len(chunk))})", chunk):
            header = jsonio.loads(header_json)
            info = state_from_row(state)
            cwd = header.get("cwd") if isinstance(header, dict) else None
            clean = marks and last is not None and last == mark
            if clean:
                trusted.add(key)
            facts[key] = SessionFacts(from_db(key), title_of(info), info.name, cwd if isinstance(cwd, str) else "",
                                      frozenset() if clean else branch_ids(conn, key))
    off: set[int] = set()
    rowids = [row[2] for row in found if row[0] in trusted]
    for chunk in _chunks(rowids):
        off.update(rowid for rowid, in conn.execute(
            f"SELECT rowid FROM search_off_branch WHERE rowid IN ({', '.join('?' * len(chunk))})", chunk))
    stamps: dict[tuple[Any, int], Any] = {}
    pairs = [(row[0], row[1]) for row in found]
    for chunk in _chunks(pairs):
        stamps.update(((key, seq), stamp) for key, seq, stamp in conn.execute(
            f"SELECT e.session_id, e.seq, e.timestamp FROM (VALUES {', '.join('(?, ?)' for _ in chunk)}) AS v"
            " JOIN entries AS e ON e.session_id = v.column1 AND e.seq = v.column2",
            [value for pair in chunk for value in pair]))
    hits = []
    for key, seq, rowid, entry_id, kind, role, _, text, folded, rank in found:
        stamp = stamps.get((key, seq))
        hits.append(make_hit(facts[key], entry_id, kind, from_db(stamp) if stamp is not None else None, text, role,
                             query, rank, folded=folded,
                             on_branch=(rowid not in off) if key in trusted else None))
    return hits


class SearchedStore(SqliteTransactions, ScannedStore, Protocol):
    """What :func:`search_store` asks of a SQLite store: its transactions, and the public
    reads the scan of a database without the index goes through."""


def search_store(store: SearchedStore, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
                 since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
                 limit: int | None = 50) -> list[SearchHit]:
    """:meth:`SqliteStore.search <sessiontree.stores.sqlite.SqliteStore.search>`: one read snapshot.

    A database without the index, or with the index of a schema before
    ``m014_contentless_search`` (an older schema opened read-only), is searched
    by loading and scanning every session, with the same result.

    Raises:
        SearchQueryError, ValueError: see :meth:`SessionStore.search`.
        StorageError: the database could not be read.
    """
    parsed = parse_query(query)
    filters = make_filters(cwd=cwd, roles=roles, since=since, until=until, session=session)
    limit = check_limit(limit)
    if not store.readonly:
        settle_if_due(store)
    with store.read_transaction() as conn:
        if not store.has_schema(conn):
            return []
        tables = table_names(conn)
        # A layout before m014_contentless_search (an older schema opened read-only)
        # is answered by the scan, as a database without the index is.
        if "search_fts" in tables and not has_text_column(conn):
            return _hits_from_index(conn, parsed, filters, limit, tables)
    return scan_store(store, parsed, filters, limit)


