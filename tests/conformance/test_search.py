"""Full-text search on every store: the same hits for every query of the hand-made
corpus (``search_corpus``), the fields of a hit, the filters, and hostile queries.

``tests/test_search.py`` runs these tests again on a SQLite store whose entries are
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
