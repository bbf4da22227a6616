"""Full-text search: the rule, the SQLite index and its pending tail, the command line.

The hand-made corpus (``search_corpus``) is small enough to know every answer by
reading it; the expected hit sets are written by hand from the entries' text. The
same hits on every store are in ``tests/conformance/test_search.py``; they run here
again on a SQLite store whose entries are still in the pending tail.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import search_header as header
from builders import search_message as msg
from conformance.test_search import test_filters as test_filters_on_a_pending_tail
from conformance.test_search import test_hit_fields as test_hit_fields_on_a_pending_tail
from conformance.test_search import (
    test_hostile_queries_answer_or_refuse_clearly as test_hostile_queries_on_a_pending_tail,
)
from conformance.test_search import test_same_hits_on_every_store as test_same_hits_on_a_pending_tail
from search_corpus import CORPUS, EXPECTED, fill, fill_tail, ids, pending_count
from sessiontree import SessionManager
from sessiontree.cli import cli
from sessiontree.core.search import (
    _FOLD,
    MAX_QUERY_CHARS,
    entry_text,
    fold,
    parse_query,
    snippet,
)
from sessiontree.errors import SearchQueryError, StorageError
from sessiontree.format.ids import new_entry_id
from sessiontree.search.query import parse_when, search
from sessiontree.stores import JsonlStore, MemoryStore, SqliteStore
from sessiontree.stores.sqlite import maintenance as sqlite_maintenance
from sessiontree.stores.sqlite import search as sqlite_search
from sessiontree.stores.sqlite import writes as sqlite_writes

__all__ = ["test_filters_on_a_pending_tail", "test_hit_fields_on_a_pending_tail",
           "test_hostile_queries_on_a_pending_tail", "test_same_hits_on_a_pending_tail"]


@pytest.fixture
def store(tmp_path):
    """For the store-generic tests imported above: the corpus in a SQLite store whose
    entries after each session's first are pending (see ``search_corpus.fill_tail``),
    opened read-only, so searches scan the tail."""
    made = fill_tail(tmp_path / "t.db")
    yield made
    made.close()


# -- the rule ---------------------------------------------------------------------------------


def test_fold_is_sqlite_fts5_trigram_folding():
    """Every BMP code point, and every astral one Python or our table folds, folds exactly as
    the running SQLite's trigram tokenizer (case_sensitive 0) does."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(a, tokenize='trigram case_sensitive 0')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    codes = [c for c in range(1, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    codes += [c for c in range(0x10000, 0x110000) if chr(c).lower() != chr(c) or c in _FOLD]
    conn.executemany("INSERT INTO t (rowid, a) VALUES (?, ?)", ((c, chr(c) * 3) for c in codes))
    sqlite_fold = {doc: term[0] for term, doc in conn.execute("SELECT term, doc FROM v")}
    wrong = [hex(c) for c in codes if fold(chr(c)) != sqlite_fold[c]]
    assert wrong == []
    assert fold("ÉΣς µK") == "éσσ μk"  # Kelvin sign to k
    assert len(fold("İstanbul")) == len("İstanbul")


def test_entry_text_per_type():
    alpha = CORPUS[0][1]
    assert entry_text(alpha[0]).text == "Retry work" and entry_text(alpha[0]).role is None
    assistant = entry_text(alpha[2])
    assert assistant.role == "assistant"
    assert assistant.text == "the dedup step drops lines\nI will look at _dedup_ids\nbash\ngrep -rn dedup src/\n30"
    assert entry_text(alpha[3]).text == "src/util.py:12: def _dedup_ids(ids):"  # no image data
    assert entry_text(alpha[4]).text == "pytest -k retry\n1 failed: test_retry_backoff"
    assert entry_text(alpha[5]) is None  # context_edit
    assert (entry_text(alpha[7]).role, entry_text(alpha[7]).text) == ("branchSummary", "Tried exponential backoff for retry")
    assert entry_text(alpha[8]).role == "compactionSummary"  # retired compaction: still history
    assert entry_text(CORPUS[1][1][1]).role == "custom"
    assert entry_text(CORPUS[2][1][2]) is None and entry_text(CORPUS[2][1][3]) is None
    assert entry_text(alpha[1]).ts_ms == 1_767_261_600_000
    nul = msg("n1", None, "user", "a\x00b \ud83d")
    assert entry_text(nul).text == "a\ufffdb \ufffd"


def test_query_parsing_quotes_everything():
    query = parse_query('foo "a phrase"  -x NEAR(a * "open')
    assert query.terms == ("foo", "a phrase", "-x", "NEAR(a", "*", "open")
    # detail=none answers no phrase: every distinct trigram of each term, ANDed.
    assert query.fts_expression() == ('"foo" AND "a p" AND " ph" AND "phr" AND "hra" AND "ras" AND "ase"'
                                      ' AND "nea" AND "ear" AND "ar(" AND "r(a" AND "ope" AND "pen"')
    assert parse_query("aaaa").fts_expression() == '"aaa"'  # a trigram once
    assert parse_query('say "he said ""hi"""').terms == ("say", "he said ", "hi")
    assert parse_query('x"y').fts_expression() == '"x""y"'
    assert parse_query("A a").terms == ("A",)  # folded duplicates removed
    for empty in ("", "   ", '""', '" "'):
        with pytest.raises(SearchQueryError):
            parse_query(empty)
    with pytest.raises(SearchQueryError, match="10,000 characters"):
        parse_query("x" * 10_000)
    with pytest.raises(SearchQueryError, match="terms"):
        parse_query(" ".join(f"t{i}" for i in range(40)))


def test_snippet_offsets_and_window():
    text = "x" * 300 + "Needle\there" + "y" * 300
    shown, marks = snippet(text, parse_query("needle"))
    assert shown.startswith("…") and shown.endswith("…")
    assert [shown[s:e] for s, e in marks] == ["Needle"]
    assert "\t" not in shown
    short, marks = snippet("ab ab", parse_query("ab"))
    assert (short, marks) == ("ab ab", ((0, 2), (3, 5)))


def test_parse_when():
    assert parse_when("2026-01-31").isoformat() == "2026-01-31T00:00:00+00:00"
    assert parse_when("2026-01-31", end=True).isoformat() == "2026-02-01T00:00:00+00:00"
    assert parse_when("2026-01-31T12:00Z").isoformat() == "2026-01-31T12:00:00+00:00"
    with pytest.raises(ValueError):
        parse_when("yesterday")


# -- every store ------------------------------------------------------------------------------


def test_same_hits_for_hostile_queries(tmp_path):
    stores = [fill(MemoryStore()), fill(SqliteStore(tmp_path / "s.db")), fill(JsonlStore(tmp_path / "j"))]
    for query in ["🎉", "a\x00b", "\"NEAR(x y)\"", "NEAR(x y)", "party and", "a-b", "ΣΥΦ", "tt"]:
        answers = [ids(s.search(query, limit=None)) for s in stores]
        assert answers[0] == answers[1] == answers[2], query


def test_sqlite_ranking_is_pinned(tmp_path):
    """Merged hits, worked by hand: shortest text first (FTS5 detail=none keeps no term
    frequency, so bm25 would order them by length alone), rank = sum of the term
    lengths / (characters + 200). "retry" (5): a1 "Retry work" 10 chars -> 5/210;
    a7 "retry retry retry" 17 -> 5/217; b4 32 -> 5/232; a8 35 -> 5/235; a2 39 -> 5/239;
    a5 "pytest -k retry" + newline + 28 = 44 -> 5/244; c2 (1,500 characters) last."""
    store = fill(SqliteStore(tmp_path / "s.db"))
    store.settle_derived()
    hits = store.search("retry", limit=None)
    assert [hit.entry_id for hit in hits] == [
        "a1000001", "a7000007", "b4000004", "a8000008", "a2000002", "a5000005", "c2000002"]
    assert [round(hit.rank, 12) for hit in hits[:6]] == [round(5 / (n + 200), 12) for n in (10, 17, 32, 35, 39, 44)]
    # The same order with a limit (each candidate read on its own).
    assert [hit.entry_id for hit in store.search("retry", limit=3)] == ["a1000001", "a7000007", "b4000004"]
    # Scans order by scan_score, documented to differ; the set is the same.
    scan_order = [hit.entry_id for hit in fill(MemoryStore()).search("retry", limit=None)]
    assert scan_order[0] == "a7000007" and scan_order[-1] == "c2000002"


def test_sqlite_without_index_is_scanned(tmp_path):
    """An older database opened read-only has no index: search still answers, by scanning."""
    path = tmp_path / "s.db"
    fill(SqliteStore(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE search_fts")
    conn.execute("DROP TABLE search_entries")
    conn.execute("DELETE FROM schema_migrations WHERE name = 'm004_search_index'")
    conn.commit()
    conn.close()
    readonly = SqliteStore(path, readonly=True)
    assert ids(readonly.search("dedup", limit=None)) == EXPECTED["dedup"]
    readonly.close()
    migrated = SqliteStore(path)  # a writable open runs the step, which fills the index
    assert "m004_search_index" in migrated.applied_migrations()
    assert migrated.db.conn.execute("SELECT count(*) FROM search_entries").fetchone()[0] == 14  # 8 + 4 + 2 entries with text
    assert ids(migrated.search("retry", limit=None)) == EXPECTED["retry"]
    migrated.close()


# -- the index is derived data ----------------------------------------------------------------


def index_state(store):
    conn = store.db.conn
    rows = sorted(conn.execute("SELECT session_id, seq, entry_id, type, role, ts_ms, chars FROM search_entries"))
    # The kept active-branch flags (rowids differ between builds: compare by entry).
    off = sorted(conn.execute("SELECT e.session_id, e.entry_id FROM search_off_branch AS o"
                              " JOIN search_entries AS e ON e.rowid = o.rowid"))
    assert conn.execute("SELECT count(*) FROM search_off_branch").fetchone()[0] == len(off)  # none dangling
    conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
    answers = {q: [(h.session_id, h.entry_id, round(h.rank, 9), h.on_active_branch, h.title)
                   for h in store.search(q, limit=None)] for q in PROBES}
    return rows, off, answers


def hit_sets(store):
    return {q: {(h.session_id, h.entry_id, h.on_active_branch, h.title) for h in store.search(q, limit=None)}
            for q in PROBES}


PROBES = ["retry", "dedup", "py", "東京", "x"]
TEXTS = ["retry the flaky test", "dedup ids in parser.py", "東京 x", "nothing here", "py", "RETRY again"]

operation = st.one_of(
    st.tuples(st.just("create"), st.lists(st.sampled_from(TEXTS), max_size=4)),
    st.tuples(st.just("append"), st.integers(0, 5), st.lists(st.sampled_from(TEXTS), min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("fork"), st.integers(0, 5)),
    st.tuples(st.just("branch"), st.integers(0, 5)),
    # The last item: settle it as it is written (what `sessiontree import` does).
    st.tuples(st.just("import"), st.lists(st.sampled_from(TEXTS), max_size=3), st.booleans()),
    st.tuples(st.just("rename"), st.integers(0, 5), st.sampled_from(TEXTS)),
    # Branches inside a session (the leaf moves back, then an append), leaf records,
    # and merges at any point: the kept active-branch flags must follow all of them.
    st.tuples(st.just("rebranch"), st.integers(0, 5), st.integers(0, 50), st.sampled_from(TEXTS)),
    st.tuples(st.just("leaf"), st.integers(0, 5), st.integers(0, 50)),
    st.tuples(st.just("merge"),),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=1, max_size=10))
def test_index_equals_a_rebuild_after_any_operations(operations):
    with tempfile.TemporaryDirectory() as directory:
        store = SqliteStore(os.path.join(directory, "s.db"))
        sessions: list[str] = []

        def pick(index):
            return SessionManager.open(store, sessions[index % len(sessions)]) if sessions else None

        for op in operations:
            kind = op[0]
            if kind == "create":
                manager = SessionManager.create("/w", store=store)
                for text in op[1]:
                    manager.append_message({"role": "user", "content": text, "timestamp": 1})
                manager.append_session_info("s")  # a session is stored from its first entry
                sessions.append(manager.get_session_id())
            elif kind == "import":
                other = MemoryStore()
                manager = SessionManager.create("/w", store=other)
                for text in op[1]:
                    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": text}],
                                            "api": "a", "provider": "p", "model": "m", "usage": {},
                                            "stopReason": "stop", "timestamp": 1})
                manager.append_session_info("imported")
                parsed = other.load(manager.get_session_id())
                store.create_many([(parsed.header, parsed.entries, parsed.raw)], settle=op[2])
                sessions.append(parsed.header["id"])
            elif not sessions:
                continue
            elif kind == "append":
                manager = pick(op[1])
                for text in op[2]:
                    manager.append_message({"role": "user", "content": text, "timestamp": 2})
            elif kind == "delete":
                victim = sessions.pop(op[1] % len(sessions))
                store.delete(victim)
            elif kind == "fork":
                forked = pick(op[1]).fork_to("/w2", store)
                sessions.append(forked.get_session_id())
            elif kind == "branch":
                manager = pick(op[1])
                entries = manager.get_entries()
                if entries:
                    new_id = manager.create_branched_session(entries[len(entries) // 2]["id"])
                    if new_id is not None and store.exists(new_id):
                        sessions.append(new_id)
            elif kind == "rename":
                pick(op[1]).append_session_info(op[2])
            elif kind == "rebranch":
                manager = pick(op[1])
                entries = manager.get_entries()
                manager.branch(entries[op[2] % len(entries)]["id"])
                manager.append_message({"role": "user", "content": op[3], "timestamp": 3})
            elif kind == "leaf":
                session_id = sessions[op[1] % len(sessions)]
                entries = store.load(session_id).entries
                target = entries[op[2] % len(entries)]["id"]
                store.append(session_id, [{"type": "leaf", "id": new_entry_id({e["id"] for e in entries}),
                                           "parentId": entries[-1]["id"],
                                           "timestamp": "2026-01-01T00:00:00.000Z", "targetId": target}])
            elif kind == "merge":
                sqlite_search.merge_store(store)
        # Whatever is pending, the hits are those of a rebuild; a merge then leaves
        # exactly the rebuilt index (rows, off-branch marks, hence the ranks).
        store.db.conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
        sets = hit_sets(store)
        sqlite_search.merge_store(store)
        before = index_state(store)
        assert hit_sets(store) == sets
        store.reindex()
        assert index_state(store) == before
        assert store.db.conn.execute("SELECT count(*) FROM entries AS e JOIN search_merged AS m"
                                   " ON m.session_id = e.session_id WHERE e.seq > m.seq").fetchone() == (0,)
        # And a store built from nothing but the same entries answers the same.
        fresh = MemoryStore()
        for session_id in store.session_ids():
            parsed = store.load(session_id)
            fresh.create(parsed.header, parsed.entries, parsed.raw)
        for query in PROBES:
            assert ids(fresh.search(query, limit=None)) == {h[1] for h in before[2][query]}
        # The active-branch flags and titles, kept or walked, are those of the loaded tree.
        assert hit_sets(fresh) == sets
        store.close()


def test_pending_tail_is_found_ranked_first_and_merged_by_settle(tmp_path):
    """Writes add no index row; their entries are scanned (pending first, by
    scan_score); creating a session merges nothing either; settling merges them all,
    and then bm25 orders every hit."""
    path = tmp_path / "t.db"
    store = fill_tail(path)
    store.close()
    store = SqliteStore(path)
    tail_before = pending_count(store)
    assert tail_before > 0
    hits = store.search("retry", limit=None)
    assert ids(hits) == EXPECTED["retry"]
    merged = {row[0] for row in store.db.conn.execute("SELECT entry_id FROM search_entries")}
    tail = [hit for hit in hits if hit.entry_id not in merged]
    assert hits[:len(tail)] == tail and tail  # the pending hits come first...
    assert len(tail) < len(hits)  # ...before merged ones
    assert [h.rank for h in tail] == sorted((h.rank for h in tail), reverse=True)  # ...best first
    assert [h.entry_id for h in store.search("retry", limit=2)] == [h.entry_id for h in hits[:2]]
    # Creating a session merges nothing: its one record joins the tail.
    store.create(header("sess-delta", "/w/delta"), [msg("d1000001", None, "user", "no match here")])
    assert pending_count(store) == tail_before + 1
    # Settling merges every pending record, in short transactions.
    assert store.settle_derived() == tail_before + 1
    assert pending_count(store) == 0
    assert [h.entry_id for h in store.search("retry", limit=None)] == [
        "a1000001", "a7000007", "b4000004", "a8000008", "a2000002", "a5000005", "c2000002"]  # the pinned order
    store.close()


def test_readonly_search_of_a_pending_tail_writes_nothing(tmp_path):
    path = tmp_path / "t.db"
    fill_tail(path).close()
    files = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
    readonly = SqliteStore(path, readonly=True)
    assert ids(readonly.search("dedup", limit=None)) == EXPECTED["dedup"]
    assert ids(readonly.search("py", limit=None)) == EXPECTED["py"]
    readonly.close()
    assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == files


def test_no_write_merges_and_a_search_merges_a_long_tail(tmp_path, monkeypatch):
    """Appends never merge, however long the tail; a search on a writable store that
    finds more than MAX_PENDING pending records merges them first (in transactions
    of SETTLE_BUDGET records), and a read-only one scans them and writes nothing."""
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", 3)
    monkeypatch.setattr(sqlite_maintenance, "SETTLE_BUDGET", 2)
    store = fill(SqliteStore(tmp_path / "s.db"))
    store.settle_derived()
    parent = "b4000004"
    for index in range(5, 9):
        store.append("sess-beta", [msg(f"b{index}00000{index}", parent, "user", f"zebra {index}", index)])
        parent = f"b{index}00000{index}"
        assert pending_count(store) == index - 4  # the 4th append crosses 3: still nothing merged
    store.close()
    readonly = SqliteStore(tmp_path / "s.db", readonly=True)
    assert ids(readonly.search("zebra", limit=None)) == {"b5000005", "b6000006", "b7000007", "b8000008"}
    assert pending_count(readonly) == 4
    readonly.close()
    store = SqliteStore(tmp_path / "s.db")
    calls = []
    real = sqlite_search.merge_pending
    monkeypatch.setattr(sqlite_search, "merge_pending",
                        lambda conn, budget=None: calls.append(budget) or real(conn, budget))
    assert ids(store.search("zebra", limit=None)) == {"b5000005", "b6000006", "b7000007", "b8000008"}
    assert pending_count(store) == 0
    assert calls == [2, 2, 2]  # 2 + 2 records, then an empty round that ends the settle
    store.close()


def test_delete_and_merge_store_with_a_pending_tail(tmp_path):
    path = tmp_path / "t.db"
    fill_tail(path).close()
    store = SqliteStore(path)
    store.delete("sess-alpha")
    assert ids(store.search("retry", limit=None)) == {"b4000004", "c2000002"}
    assert sqlite_search.merge_store(store) > 0
    assert pending_count(store) == 0 and sqlite_search.merge_store(store) == 0
    assert ids(store.search("retry", limit=None)) == {"b4000004", "c2000002"}
    store.db.conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
    store.close()
    with pytest.raises(StorageError):
        sqlite_search.merge_store(SqliteStore(path, readonly=True))


def test_delete_removes_the_session_from_the_index(tmp_path):
    store = fill(SqliteStore(tmp_path / "s.db"))
    store.delete("sess-alpha")
    assert store.db.conn.execute("SELECT count(*) FROM search_entries WHERE session_id = 'sess-alpha'").fetchone() == (0,)
    assert ids(store.search("retry", limit=None)) == {"b4000004", "c2000002"}
    store.db.conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")


def test_failed_append_leaves_no_index_rows(tmp_path, monkeypatch):
    store = fill(SqliteStore(tmp_path / "s.db"))

    def broken(conn, rows):
        raise sqlite3.OperationalError("injected")

    monkeypatch.setattr(sqlite_writes, "_insert_text_rows", broken)
    with pytest.raises(Exception):  # noqa: B017 - whatever the injected failure surfaces as; the rollback is checked
        store.append("sess-beta", [msg("b5000005", "b4000004", "user", "zebra crossing", 5)])
    monkeypatch.undo()
    assert store.search("zebra") == []


# -- command line -----------------------------------------------------------------------------


@pytest.fixture
def cli_store(tmp_path):
    path = tmp_path / "s.db"
    fill(SqliteStore(path)).close()
    return str(path)


def run(store_path, *args):
    return CliRunner().invoke(cli, ["--store", store_path, *args], catch_exceptions=False)


def test_cli_search_rows_grouped_by_session(cli_store):
    result = run(cli_store, "search", "retry")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("sess-alp  (5 hits)  ") and "Retry work" in lines[0]  # count before the title
    assert lines[1].split()[:2] == ["a7000007", "assistant"]
    assert "[off branch]" in lines[1]
    assert any(line.startswith("sess-bet ") for line in lines)


def test_cli_search_json_and_filters(cli_store):
    result = run(cli_store, "search", "--json", "--role", "user", "--session", "sess-al", "retry")
    data = json.loads(result.output)
    assert [hit["entryId"] for hit in data["hits"]] == ["a2000002"] and data["more"] is False
    result = run(cli_store, "search", "--json", "--since", "2026-01-02", "retry")
    assert json.loads(result.output)["hits"] == []
    result = run(cli_store, "search", "--json", "--until", "2026-01-01", "retry")
    assert len(json.loads(result.output)["hits"]) == 7  # the whole day of the 1st
    result = run(cli_store, "search", "--json", "-n", "2", "retry")
    assert json.loads(result.output)["more"] is True


def test_cli_search_phrase_argument_and_usage_errors(cli_store):
    assert run(cli_store, "search", "flaky retry").output.count("a2000002") == 1
    assert "a2000002" not in run(cli_store, "search", "retry parser").output  # one argument: a phrase
    assert "a2000002" in run(cli_store, "search", "retry", "parser").output  # two arguments: two terms
    for args in ([], [""], ['""']):
        assert run(cli_store, "search", *args).exit_code == 2
    assert run(cli_store, "search", "x" * (MAX_QUERY_CHARS + 1)).exit_code == 2
    assert run(cli_store, "search", "--since", "soon", "x").exit_code == 2
    assert run(cli_store, "search", "zzzz").output == "No matches.\n"
    # --role is checked: an unknown value is a usage error, not a silent "No matches.";
    # case is forgiven.
    bad = run(cli_store, "search", "--role", "tool", "retry")
    assert bad.exit_code == 2 and "unknown role 'tool'" in bad.output
    same = run(cli_store, "search", "--json", "--role", "USER", "--session", "sess-al", "retry")
    assert [hit["entryId"] for hit in json.loads(same.output)["hits"]] == ["a2000002"]


def test_cli_snippet_is_sanitised(tmp_path):
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    store.create(header("evil", "/w"), [msg("e1000001", None, "user", "hack \x1b]0;owned\x07 \u202eevil here", 0)])
    store.close()
    out = run(str(path), "search", "evil").output
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b" in out


def test_cli_show_entry_accepts_the_printed_id(cli_store):
    result = run(cli_store, "show", "sess-alpha", "--entry", "a7000007")
    assert result.exit_code == 0
    assert "no (an abandoned branch)" in result.output and "retry retry retry" in result.output
    data = json.loads(run(cli_store, "show", "sess-alpha", "--entry", "a2", "--json").output)
    assert data["entry"]["id"] == "a2000002" and data["onActiveBranch"] is True
    assert run(cli_store, "context", "sess-alpha", "--leaf", "a7000007").exit_code == 0


def test_library_search_result(tmp_path):
    store = fill(MemoryStore())
    result = search(store, "retry", limit=2)
    assert len(result.hits) == 2 and result.more
    assert next(sid for sid, _ in result.by_session()) == result.hits[0].session_id
    assert search(store, "retry", limit=None).more is False


def test_cli_search_merges_a_long_tail_and_import_settles(tmp_path, monkeypatch):
    """``sessiontree search`` opens the store read-only; past MAX_PENDING pending
    records it merges them through a writable handle first (same hits), and
    ``sessiontree import`` settles what it wrote before it returns."""
    path = str(tmp_path / "t.db")
    fill_tail(path).close()
    store = SqliteStore(path)
    tail = pending_count(store)
    store.close()
    assert tail > 3
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", tail)  # not due: the search scans, writes nothing
    out = json.loads(run(path, "search", "retry", "-n", "100", "--json").stdout)
    assert {hit["entryId"] for hit in out["hits"]} == EXPECTED["retry"]
    store = SqliteStore(path, readonly=True)
    assert pending_count(store) == tail
    store.close()
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", tail - 1)  # due: merged first
    out = json.loads(run(path, "search", "retry", "-n", "100", "--json").stdout)
    assert {hit["entryId"] for hit in out["hits"]} == EXPECTED["retry"]
    store = SqliteStore(path, readonly=True)
    assert pending_count(store) == 0
    store.close()
    # An import leaves nothing pending: the sessions it wrote are merged at its end.
    source = tmp_path / "src"
    source.mkdir()
    for head, entries in CORPUS[:2]:
        fresh = dict(head, id=head["id"] + "-copy")
        (source / f"{fresh['id']}.jsonl").write_text(
            "".join(json.dumps(record) + "\n" for record in [fresh, *entries]))
    target = str(tmp_path / "imported.db")
    assert "2 imported" in run(target, "import", str(source)).stdout
    store = SqliteStore(target, readonly=True)
    assert pending_count(store) == 0
    assert store.db.conn.execute("SELECT count(*) FROM search_entries").fetchone()[0] > 0
    store.close()


def test_a_write_after_deleting_the_newest_session_and_a_clock_step_back_is_found(tmp_path, monkeypatch):
    """The mark of the last full merge follows a delete down: after the newest session
    is deleted and the clock steps back, a new session's updated_at (only above the
    stored ones) is still above the mark, so its pending entries are found."""
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("sess-one", "/w/a"), [msg("a1000001", None, "user", "first words", 1)])
    store.create(header("sess-two", "/w/b"), [msg("b1000001", None, "user", "second words", 2)])
    store.settle_derived()
    newest = store.db.conn.execute("SELECT max(updated_at) FROM sessions").fetchone()[0]
    assert store.db.conn.execute("SELECT updated_at FROM search_state").fetchone() == (newest,)
    store.delete("sess-two")
    monkeypatch.setattr(sqlite_writes.time, "time_ns", lambda: 1_000_000_000)  # 1970: a clock far behind
    store.create(header("sess-three", "/w/c"), [msg("c1000001", None, "user", "zygote words", 3)])
    assert store.db.conn.execute("SELECT updated_at FROM sessions WHERE id = 'sess-three'").fetchone()[0] < newest
    assert [hit.entry_id for hit in store.search("zygote")] == ["c1000001"]
    store.close()


def test_reindex_of_one_session_merges_it(tmp_path):
    """reindex keeps updated_at (a repair is not activity): the rebuilt session is
    merged in the reindex's transaction, found by its missing watermark."""
    store = fill(SqliteStore(tmp_path / "s.db"))
    store.settle_derived()
    assert store.reindex("sess-alpha") == 1
    assert pending_count(store) == 0
    assert ids(store.search("retry", limit=None)) == EXPECTED["retry"]
    store.close()
