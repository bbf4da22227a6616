"""Full-text search on every store: the same hits for every query of the hand-made
corpus (``search_corpus``), the fields of a hit, the filters, and hostile queries.

``tests/search/test_search.py`` runs these tests again on a SQLite store whose entries are
still in the pending tail (not yet merged into the index), with a ``store`` fixture of its own.

The ``store`` fixture here overrides the conformance one by name and takes it as its
argument: the same four kinds, each filled with the corpus before the test."""

from __future__ import annotations

import pytest

from search_corpus import EXPECTED, fill, ids
from sessiontree.errors import SearchQueryError


@pytest.fixture
def store(store):
    """The conformance ``store`` of every kind, holding the search corpus."""
    return fill(store)


@pytest.mark.parametrize("query", sorted(EXPECTED))
def test_same_hits_on_every_store(store, query):
    assert ids(store.search(query, limit=None)) == EXPECTED[query]


def test_hit_fields(store):
    hits = {hit.entry_id: hit for hit in store.search("retry", limit=None)}
    a2 = hits["a2000002"]  # hidden from the model by a context_edit: still found
    assert (a2.session_id, a2.title, a2.session_name, a2.cwd) == ("sess-alpha", "Retry work", "Retry work", "/w/alpha")
    assert (a2.entry_type, a2.role, a2.timestamp) == ("message", "user", "2026-01-01T10:00:00.000Z")
    assert a2.snippet == "Please fix the flaky retry in parser.py"
    assert a2.highlights == ((21, 26),)
    assert a2.on_active_branch is True
    assert hits["a7000007"].on_active_branch is False  # the abandoned branch
    assert hits["a8000008"].on_active_branch is True
    assert hits["b4000004"].title == "日本語のテキスト 東京タワー"  # summary stale: the first message
    assert hits["a7000007"].to_dict()["onActiveBranch"] is False


def test_filters(store):
    assert ids(store.search("retry", roles=["user"], limit=None)) == {"a2000002"}
    assert ids(store.search("retry", roles=["session_info", "branchSummary"], limit=None)) == {"a1000001", "a8000008"}
    assert ids(store.search("retry", cwd="/w/beta", limit=None)) == {"b4000004"}
    assert ids(store.search("retry", cwd="/w/alpha/../beta", limit=None)) == {"b4000004"}
    assert ids(store.search("retry", session="sess-gamma", limit=None)) == {"c2000002"}
    assert ids(store.search("retry", session="nope", limit=None)) == set()
    assert ids(store.search("retry", since="2026-01-01T10:04:00Z", until="2026-01-01T10:05:00Z",
                            limit=None)) == {"a7000007"}
    assert ids(store.search("retry", since=1_767_261_840_000, limit=None)) == {"a7000007", "a8000008"}
    assert len(store.search("retry", limit=3)) == 3
    with pytest.raises(ValueError):
        store.search("retry", limit=0)
    with pytest.raises(ValueError):
        store.search("retry", since="not a date")


@pytest.mark.parametrize("query", ["\x00", "a\x00b", "🎉🎉🎉", "\"", "NEAR(a b, 2)", "x OR y", "col:val",
                                   "^start", "a AND", "{a b}", "'", "-", "\\", "\ud800"])
def test_hostile_queries_answer_or_refuse_clearly(store, query):
    try:
        hits = store.search(query)
    except SearchQueryError as exc:
        assert "search query" in str(exc)
    else:
        assert isinstance(hits, list)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_cursor_pages_give_the_whole_ranking(store, size):
    """``search`` paged by its cursor (docs/search.md, "Paging"): the pages joined are the
    search without a limit, in order, each hit once; the last page has no cursor. "retry"
    is said by seven entries (search_corpus.EXPECTED)."""
    from sessiontree.search.query import search

    whole = [(h.session_id, h.entry_id) for h in search(store, "retry", limit=None).hits]
    assert {entry for _, entry in whole} == EXPECTED["retry"]
    paged: list[tuple[str, str]] = []
    cursor = None
    for _ in range(len(whole) + 1):
        result = search(store, "retry", limit=size, cursor=cursor)
        paged += [(h.session_id, h.entry_id) for h in result.hits]
        assert result.more == (result.next_cursor is not None)
        cursor = result.next_cursor
        if cursor is None:
            break
    assert paged == whole


def test_cursor_pages_by_session(store):
    """``per_session``: one page of one session at a time lists each session holding a hit
    once, in the order of its best hit ("retry": sess-alpha, sess-beta, sess-gamma hold
    hits, search_corpus)."""
    from sessiontree.search.query import group_by_session, search

    order = [sid for sid, _ in group_by_session(search(store, "retry", limit=None).hits)]
    listed: list[str] = []
    cursor = None
    for _ in range(5):
        result = search(store, "retry", limit=1, cursor=cursor, per_session=True)
        listed += [h.session_id for h in result.hits]
        cursor = result.next_cursor
        if cursor is None:
            break
    assert sorted(listed) == sorted(set(order)) and listed == order


def test_a_cursor_is_bound_to_its_search(store):
    from sessiontree.errors import SearchCursorError
    from sessiontree.search.query import search

    cursor = search(store, "retry", limit=1).next_cursor
    assert cursor is not None
    with pytest.raises(SearchCursorError, match="another query or other filters"):
        search(store, "retry", limit=1, cursor=cursor, cwd="/w/alpha")
    with pytest.raises(SearchCursorError, match="another query"):
        search(store, "dedup", limit=1, cursor=cursor)
    for damaged in (cursor[:-3], "!!", cursor[::-1]):
        with pytest.raises(SearchCursorError):
            search(store, "retry", limit=1, cursor=damaged)
