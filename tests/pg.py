"""A throwaway PostgreSQL cluster for the tests (and benchmarks): one per test run.

``initdb`` takes seconds, so a run starts one cluster (:func:`start_cluster`)
and every test gets its own fresh database from it (:meth:`Cluster.new_database`).
The cluster lives in a temporary directory under ``/tmp``, listens on a free
loopback port and on a unix socket in that directory, runs with ``fsync=off``
(a test cluster need not survive a power loss), and is stopped and removed
at the end of the run, also when tests fail.

PostgreSQL refuses to run as root, so when the tests run as root (CI does)
``initdb``, ``pg_ctl`` and the server run as the unprivileged ``postgres``
user, which owns the directory. The binaries are found in
``$SESSIONTREE_PG_BIN``, ``/usr/lib/postgresql/<version>/bin`` (Debian),
``pg_config --bindir``, or on ``PATH``; :func:`unavailable` says why a
cluster cannot be had, and tests that need one skip with that reason.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time

__all__ = ["Cluster", "attach_cluster", "find_bindir", "start_cluster", "unavailable"]

_RUN_AS = "postgres"


def find_bindir() -> str | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``."""
    candidates = []
    if os.environ.get("SESSIONTREE_PG_BIN"):
        candidates.append(os.environ["SESSIONTREE_PG_BIN"])
    # Newest version first: Debian installs side by side.
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda p: [int(x) for x in p.split("/")[-2].split(".") if x.isdigit()], reverse=True)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            candidates.append(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                             check=True).stdout.strip())
        except (OSError, subprocess.CalledProcessError):
            pass
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(os.path.dirname(initdb))
    for directory in candidates:
        if all(os.access(os.path.join(directory, name), os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


def unavailable() -> str | None:
    """Why no test cluster can be started here, or ``None`` when one can."""
    if find_bindir() is None:
        return ("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql "
                "package or set SESSIONTREE_PG_BIN")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg 3 and psycopg_pool are not installed (pip install 'sessiontree[postgres]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(_RUN_AS)
        except KeyError:
            return f"running as root and there is no unprivileged {_RUN_AS!r} user to run PostgreSQL as"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """A running throwaway cluster.

    Attributes:
        bindir: where the server binaries are.
        base: the temporary directory (data directory ``data``, socket, log).
        port: the loopback TCP port.
        user: the superuser name (``postgres``).
    """

    def __init__(self, bindir: str, base: str, port: int) -> None:
        self.bindir = bindir
        self.base = base
        #: More ``-c name=value`` server options (benchmarks/team.py's ``--shared-buffers``).
        self.extra_options = ""
        self.port = port
        self.user = _RUN_AS
        self.data = os.path.join(base, "data")
        self.log = os.path.join(base, "server.log")
        self._names = itertools.count(1)

    # -- running commands as the server's user ---------------------------------------------

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [os.path.join(self.bindir, args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", _RUN_AS, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=timeout, cwd=self.base)

    def start(self) -> None:
        """Start the server (``pg_ctl start -w``); returns once it accepts connections."""
        options = (f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                   "-c shared_buffers=64MB " + self.extra_options)
        result = self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", options, "-w", "-t", "60", "start",
                           check=False)
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {result.stderr.strip()}\n{self.read_log()[-2000:]}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl stop -m MODE``: ``fast`` or ``immediate``); no error if it is down."""
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        """Stop, then start again on the same port."""
        self.stop(mode)
        self.start()

    def read_log(self) -> str:
        """The server log so far (for failure messages)."""
        try:
            with open(self.log, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""

    def destroy(self) -> None:
        """Stop the server at once and remove the directory."""
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)

    # -- databases ---------------------------------------------------------------------------

    def url(self, database: str = "postgres", *, socket_host: bool = False) -> str:
        """A ``postgresql://`` URL for ``database``: over TCP, or with ``socket_host``
        over the unix socket (libpq's ``?host=/dir`` form)."""
        if socket_host:
            return f"postgresql:///{database}?host={self.base}&port={self.port}&user={self.user}"
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        """Run one statement on the ``postgres`` database, outside a transaction."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self, prefix: str = "t") -> str:
        """Create an empty database; returns its name."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        self.admin(f'CREATE DATABASE "{name}" TEMPLATE template1')
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, ending its connections first."""
        try:
            self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except Exception:  # the server may be down after a fault test; the cluster goes anyway
            pass


def attach_cluster(spec: str) -> Cluster:
    """A cluster someone else started and will stop: ``spec`` is ``BASE:PORT`` (its
    directory and port), as ``$SESSIONTREE_TEST_PG_CLUSTER`` gives it, to save the
    start-up during development. :meth:`Cluster.destroy` is then the caller's business."""
    base, _, port = spec.rpartition(":")
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found")
    return Cluster(bindir, base, int(port))


def start_cluster() -> Cluster:
    """initdb a new cluster in a fresh directory under /tmp and start it.

    Raises:
        RuntimeError: :func:`unavailable` gives a reason, or initdb/pg_ctl failed.
    """
    reason = unavailable()
    if reason:
        raise RuntimeError(reason)
    bindir = find_bindir()
    assert bindir is not None
    # Under /tmp (not pytest's tmp_path, which may sit below root's 0700 home) so the
    # server's user can reach it; short, since a socket path is limited to ~100 bytes.
    base = tempfile.mkdtemp(prefix="st-pg-", dir="/tmp")
    if os.geteuid() == 0:
        entry = pwd.getpwnam(_RUN_AS)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    cluster = Cluster(bindir, base, _free_port())
    try:
        result = cluster._run("initdb", "-D", cluster.data, "-U", _RUN_AS, "--auth=trust", "-E", "UTF8",
                              "--locale=C", "--no-sync", check=False)
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed: {result.stderr.strip()}")
        for attempt in range(3):
            try:
                cluster.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
                cluster.port = _free_port()  # another process took the port meanwhile
                time.sleep(0.2)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    return cluster
