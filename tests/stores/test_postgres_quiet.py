"""No psycopg internals on stderr (issue 38 item 7): two hosts growing one session (the
second one's append finds the entries already stored by the first) say nothing but their
results, and a store whose server went away gives one ``StorageError`` line, without
``psycopg.pool``'s "discarding closed connection" warning before it. Synthetic sessions,
two hosts simulated in one process (each store its own ``sync_host``)."""

from __future__ import annotations

import logging
import sys

import pytest

from sync_support import SID, append, entries, sync_one
from sync_support import agent_file as write_agent_file

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("_fake_home")]


def _psycopg_lines(caplog) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.name.startswith("psycopg") and r.levelno >= logging.WARNING]


def _duplicate_key_errors(pg_cluster) -> int:
    return sum("duplicate key value" in line for line in pg_cluster.read_log().splitlines())


def test_a_second_host_appending_what_the_first_stored_is_quiet(pg_url, pg_cluster, _fake_home, caplog):
    """The cause of psycopg's "error ignored terminating <psycopg.Pipeline>": host B's
    append hit the unique key of entries host A had just stored, and the error surfaced
    while the pipeline unwound. Now B asks first, under the session's lock: no failed
    statement at all (the server's log holds no new duplicate-key error)."""
    from sessiontree.stores.postgres.store import PostgresStore

    before = _duplicate_key_errors(pg_cluster)
    caplog.set_level(logging.INFO, logger="psycopg")
    path = write_agent_file(_fake_home, session_id=SID, n=3)
    host_a, host_b = PostgresStore(pg_url, create=True), PostgresStore(pg_url)
    host_a.sync_host, host_b.sync_host = "host-a", "host-b"
    try:
        assert sync_one(host_a, path).status == "new"
        assert sync_one(host_b, path).status == "unchanged"  # the same copy: state recorded only
        append(path, entries(4, 2, "00000003"))
        assert sync_one(host_a, path).status == "grown"
        # Host B's state says 3 entries; the file has 5, and the store holds them all already.
        result = sync_one(host_b, path)
        assert (result.status, result.added) == ("unchanged", 0), result
        assert [e["id"] for e in host_b.read(SID).entries] == [f"{n:08x}" for n in range(1, 6)]
    finally:
        host_a.close()
        host_b.close()
    assert _psycopg_lines(caplog) == []
    assert _duplicate_key_errors(pg_cluster) == before


def test_a_killed_server_gives_one_line_and_no_pool_warning(pg_cluster, tmp_path):
    """The server goes away under an open store: the next call fails with StorageError;
    nothing of psycopg_pool's reaches stderr (run in a child: its stderr is the user's)."""
    import subprocess

    name = pg_cluster.new_database("quiet")
    url = pg_cluster.url(name)
    script = (
        "import sys\n"
        "from sessiontree.stores.postgres.store import PostgresStore\n"
        "from sessiontree.errors import StorageError\n"
        f"store = PostgresStore({url!r}, create=True, timeout=2)\n"
        "store.session_ids()\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.readline()\n"
        "try:\n"
        "    store.session_ids()\n"
        "except StorageError as exc:\n"
        "    print('error:', str(exc).splitlines()[0], file=sys.stderr)\n"
        "    raise SystemExit(1)\n"
        "raise SystemExit(0)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        pg_cluster.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
                         " AND pid <> pg_backend_pid()")
        pg_cluster.stop("immediate")
        try:
            _, err = child.communicate("go\n", timeout=120)
        finally:
            pg_cluster.start()
    finally:
        if child.poll() is None:
            child.kill()
    lines = err.splitlines()
    assert child.returncode == 1, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    pg_cluster.drop_database(name)
