"""``open_store`` and ``default_store_url`` (``spec:stores``: URLs, plain paths, the default store)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

from sessiontree.errors import StoreOpenError
from sessiontree.stores import JsonlStore, MemoryStore, SqliteStore, default_store_url, open_store, resolve_store


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No SESSIONTREE_STORE from the environment, the data dir under tmp_path, cwd = tmp_path."""
    monkeypatch.delenv("SESSIONTREE_STORE", raising=False)
    data = tmp_path / "data"
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda name: str(data / name))
    monkeypatch.chdir(tmp_path)
    return data


def test_memory_url():
    store = open_store("memory:")
    assert isinstance(store, MemoryStore)
    assert (store.url, store.kind) == ("memory:", "memory")


def test_sqlite_relative_and_absolute_urls(tmp_path):
    rel = open_store("sqlite:///rel.db")
    assert isinstance(rel, SqliteStore)
    assert rel.path == str(tmp_path / "rel.db")
    assert rel.url == "sqlite:///" + str(tmp_path / "rel.db")
    assert rel.url.startswith("sqlite:////")
    rel.close()
    absolute = tmp_path / "sub" / "abs.db"
    store = open_store(f"sqlite:///{absolute}")  # "/" of the path makes four slashes
    assert f"sqlite:///{absolute}".startswith("sqlite:////")
    assert isinstance(store, SqliteStore) and store.path == str(absolute)
    assert os.path.isfile(absolute)
    store.close()
    # The URL a store reports opens the same store again.
    again = open_store(store.url)
    assert again.path == str(absolute)
    again.close()


def test_jsonl_relative_and_absolute_urls(tmp_path):
    rel = open_store("jsonl:///sessions")
    assert isinstance(rel, JsonlStore)
    assert rel.directory == str(tmp_path / "sessions")
    assert rel.url == "jsonl:///" + str(tmp_path / "sessions")
    assert os.path.isdir(tmp_path / "sessions")
    absolute = tmp_path / "abs" / "dir"
    store = open_store(f"jsonl:///{absolute}")
    assert isinstance(store, JsonlStore) and store.directory == str(absolute)
    assert open_store(store.url).directory == str(absolute)


def test_plain_paths(tmp_path):
    (tmp_path / "existing").mkdir()
    assert isinstance(open_store(str(tmp_path / "existing")), JsonlStore)
    assert isinstance(open_store("existing"), JsonlStore)
    slash = open_store("fresh/")  # a trailing slash means a directory, created
    assert isinstance(slash, JsonlStore) and os.path.isdir(tmp_path / "fresh")
    db = open_store("my.db")
    assert isinstance(db, SqliteStore) and db.path == str(tmp_path / "my.db")
    db.close()
    no_suffix = open_store(tmp_path / "plainfile")  # os.PathLike works too
    assert isinstance(no_suffix, SqliteStore)
    no_suffix.close()


def test_default_is_sqlite_in_the_platform_data_dir(isolated):
    expected = isolated / "sessiontree" / "sessions.db"
    assert default_store_url() == "sqlite:///" + str(expected)
    store = open_store()
    assert isinstance(store, SqliteStore) and store.path == str(expected)
    assert os.path.isfile(expected)
    store.close()


def test_environment_overrides_the_default(monkeypatch, tmp_path):
    monkeypatch.setenv("SESSIONTREE_STORE", "memory:")
    assert default_store_url() == "memory:"
    assert isinstance(open_store(), MemoryStore)
    monkeypatch.setenv("SESSIONTREE_STORE", f"jsonl:///{tmp_path / 'envdir'}")
    store = open_store(None)
    assert isinstance(store, JsonlStore) and store.directory == str(tmp_path / "envdir")
    monkeypatch.setenv("SESSIONTREE_STORE", str(tmp_path / "env.db"))  # a plain path works too
    assert isinstance(open_store(), SqliteStore)
    monkeypatch.setenv("SESSIONTREE_STORE", "")  # empty means unset
    assert default_store_url().startswith("sqlite:////")


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://user@localhost/sessions", "postgresql://user@localhost/sessions"),
    ("postgres://me:secret@h:5433/db?sslmode=require", "postgres://me@h:5433/db?sslmode=require"),
    ("postgresql:///db?host=/run/postgresql&password=pw&prepare_threshold=none",
     "postgresql:///db?host=/run/postgresql"),
])
def test_postgres_urls_resolve_without_connecting_or_showing_the_password(url, shown):
    where = resolve_store(url)
    assert (where.kind, where.path, where.url, where.connect_url) == ("postgres", None, shown, url)


@pytest.mark.parametrize("url", ["postgresql+psycopg://h/db", "postgresql:db"])
def test_postgres_urls_we_do_not_take(url):
    with pytest.raises(StoreOpenError):
        open_store(url)


@pytest.mark.parametrize("url", ["mysql://h/db", "redis://x", "s3://bucket/key"])
def test_unknown_schemes(url):
    with pytest.raises(StoreOpenError, match="unknown store URL scheme"):
        open_store(url)


@pytest.mark.parametrize("url", ["sqlite://rel.db", "sqlite:///", "sqlite:rel.db", "jsonl://dir", "jsonl:///",
                                 "memory:xyz", ""])
def test_malformed_urls(url):
    with pytest.raises(StoreOpenError):
        open_store(url)


def test_password_is_not_echoed():
    with pytest.raises(StoreOpenError) as info:
        open_store("postgresql://me:secret@host/db")
    assert "secret" not in str(info.value)


def test_an_unopenable_store_never_falls_back_to_memory(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00not sqlite" * 100)
    with pytest.raises(StoreOpenError):
        open_store(f"sqlite:///{garbage}")
    with pytest.raises(StoreOpenError):
        open_store(str(garbage))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreOpenError):
        open_store(f"jsonl:///{blocker}/sub")


def test_open_store_without_create_refuses_missing_stores(tmp_path):
    from sessiontree.errors import StoreOpenError
    from sessiontree.stores import open_store

    for url in (f"sqlite:///{tmp_path / 'a' / 'x.db'}", f"jsonl:///{tmp_path / 'b'}", str(tmp_path / "c.db")):
        with pytest.raises(StoreOpenError):
            open_store(url, create=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    open_store(f"jsonl:///{tmp_path / 'b'}").close()
    open_store(f"jsonl:///{tmp_path / 'b'}", create=False).close()
