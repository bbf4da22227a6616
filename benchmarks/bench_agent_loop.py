"""``restore`` and ``archive`` beside the original agent (docs/agent-loop.md), ratios measured in one run.

Three cases, the agent's side run by its own ``SessionManager``
(``@earendil-works/pi-coding-agent``, installed by :mod:`reference`, driven by
``node/driver.mjs``):

1. **pi's session listing** (what its ``/resume`` picker reads:
   ``SessionManager.listAll(folder)``, which reads every file of the folder)
   on one project folder of N sessions, before and after
   ``archive --keep-newest 200``; the ratio before / after. The archive run
   itself (verify, rename, re-hash, record, move to the trash) is timed too.
2. **``restore`` of a long session** (default 100,000 entries) from a SQLite
   store into a new folder, against pi loading the original file
   (``SessionManager.open``) and a raw read of it. Target: restore <= 1.5x pi's load.
   The same restore through a whole ``store.read`` (the store seen without
   ``RawTexts``, the path before it and of stores without it) is timed in the
   same run, interleaved, as "before".
3. **``archive --dry-run``** on the N synced files (their mtimes spread over the
   last 60 days): with ``--older-than 90d`` (nothing old enough: decided from
   ``stat`` alone), ``--older-than 30d`` (about half verified) and
   ``--keep-newest 200`` (all but 200 verified). The session files opened are
   counted: only the ones it would archive may be. Target: <= 2 s when nothing
   needs verifying.

Usage::

    python benchmarks/bench_agent_loop.py           # small: 1,000 sessions, 10,000 entries
    python benchmarks/bench_agent_loop.py --full    # the issue's sizes: 10,000 sessions, 100,000 entries
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "src")]  # this checkout, run standalone

from bench_sync import _entry, _header, _lines  # noqa: E402  (benchmarks/ is not a package)
from reference import ensure_reference  # noqa: E402
from sessiontree.format import jsonio  # noqa: E402
from sessiontree.stores.sqlite.store import SqliteStore  # noqa: E402
from sessiontree.sync.archive import archive  # noqa: E402
from sessiontree.sync.engine import Syncer, discover  # noqa: E402
from sessiontree.sync.restore import restore  # noqa: E402

DRIVER = os.path.join(HERE, "node", "driver.mjs")
DAY = 86400.0


def pi(module: str, tmp: str, **cmd: Any) -> list[float]:
    """Times (seconds) of one driver case on pi's side."""
    argv = ["node", "--expose-gc", "--max-old-space-size=16384", DRIVER,
            json.dumps({**cmd, "module": module, "tmp": tmp})]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])["times"]


@contextmanager
def counting_opens(prefix: str) -> Iterator[list[str]]:
    """Count the files under ``prefix`` this process opens (``open`` and ``os.open``)."""
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def note(path: Any) -> None:
        if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path).startswith(prefix):
            opened.append(os.fsdecode(path))

    def wrapped_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        note(file)
        return real_open(file, *args, **kwargs)

    def wrapped_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        note(path)
        return real_os_open(path, *args, **kwargs)

    builtins.open, os.open = wrapped_open, wrapped_os_open  # type: ignore[assignment]
    try:
        yield opened
    finally:
        builtins.open, os.open = real_open, real_os_open  # type: ignore[assignment]


class WholeReads:
    """A store seen without the optional ``RawTexts`` capability: ``restore`` and ``archive``
    then read each session whole (``store.read``), as they did before it."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "read_texts":
            raise AttributeError(name)
        return getattr(self._store, name)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def session_lines(file_no: int, count: int) -> bytes:
    """``count`` chained messages of session number ``file_no``; each session's messages have
    their own timestamps, so no two sessions share a billed call (the usage ledger counts
    a call that several sessions hold once, and recounting it costs every session holding it)."""
    out, parent = [], None
    for n in range(1, count + 1):
        entry = _entry(n, parent)
        entry["message"]["timestamp"] += file_no * 1_000_000
        out.append(jsonio.dumps(entry))
        parent = entry["id"]
    return b"\n".join(out) + b"\n"


def write_folder(folder: str, files: int, entries: int, now: float) -> list[str]:
    """``files`` sessions of ``entries`` entries in one project folder, as pi names them;
    mtimes spread over the last 60 days (the last file newest)."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for n in range(files):
        session_id = f"0199{n:04x}-0000-7000-8000-{n:012x}"
        path = os.path.join(folder, f"2026-03-01T10-00-00-000Z_{session_id}.jsonl")
        with open(path, "wb") as handle:
            handle.write(_header(session_id, "/home/me/project") + session_lines(n, entries))
        stamp = now - (files - n) * (60 * DAY / files)
        os.utime(path, (stamp, stamp))
        paths.append(path)
    return paths


def case_folder(work: str, module: str, files: int, keep: int, reps: int) -> dict[str, Any]:
    now = time.time()
    folder = os.path.join(work, "agent", "sessions", "--home-me-project--")
    print(f"writing {files:,} sessions ...", file=sys.stderr)
    write_folder(folder, files, 20, now)
    store = SqliteStore(os.path.join(work, "synced.db"))
    print("syncing them ...", file=sys.stderr)
    sync_s, report = timed(lambda: Syncer(store).sync_files(discover([folder])[0]))
    assert report.counts()["new"] == files, report.counts()
    out: dict[str, Any] = {"files": files, "keep": keep, "sync_s": sync_s}
    folders = [("pi", folder)]
    print("archive --dry-run ...", file=sys.stderr)
    for label, options in [("90d", {"older_than": 90 * DAY}), ("30d", {"older_than": 30 * DAY}),
                           ("keep", {"older_than": None, "keep_newest": keep})]:
        times, opened, would = [], 0, 0
        for _ in range(reps if label == "90d" else 1):
            with counting_opens(folder) as seen:
                elapsed, result = timed(lambda options=options: archive(store, dry_run=True, now=now, folders=folders,
                                                                        **options))
            times.append(elapsed)
            opened = len(seen)
            would = sum(1 for r in result.files if r.status == "would archive")
        out[f"dry_{label}_s"], out[f"dry_{label}_opened"], out[f"dry_{label}_would"] = (
            statistics.median(times), opened, would)
    out["dry_keep_before_s"], _ = timed(lambda: archive(WholeReads(store), dry_run=True, now=now, folders=folders,
                                                        older_than=None, keep_newest=keep))
    print("pi's listing, before ...", file=sys.stderr)
    out["list_before_s"] = statistics.median(pi(module, work, op="list", dir=folder, warmup=1, iters=reps))
    print(f"archive --keep-newest {keep} (to the trash) ...", file=sys.stderr)
    os.environ["HOME"] = os.path.join(work, "home")  # the trash: $HOME/.local/share/Trash, on this filesystem
    os.makedirs(os.environ["HOME"], exist_ok=True)
    os.environ.pop("XDG_DATA_HOME", None)
    out["archive_s"], result = timed(lambda: archive(store, older_than=None, keep_newest=keep, now=now,
                                                     folders=folders))
    out["archived"] = sum(1 for r in result.files if r.status == "archived")
    assert out["archived"] == files - keep, (result.summary(), [r.reason for r in result.files if r.status == "skipped"][:3])
    store.close()
    print("pi's listing, after ...", file=sys.stderr)
    out["list_after_s"] = statistics.median(pi(module, work, op="list", dir=folder, warmup=1, iters=reps))
    out["list_ratio"] = out["list_before_s"] / out["list_after_s"]
    return out


def case_restore(work: str, module: str, entries: int, reps: int) -> dict[str, Any]:
    folder = os.path.join(work, "big", "--home-me-big--")
    os.makedirs(folder)
    session_id = "0199ffff-0000-7000-8000-000000000001"
    path = os.path.join(folder, f"2026-03-01T10-00-00-000Z_{session_id}.jsonl")
    print(f"writing and syncing a {entries:,}-entry session ...", file=sys.stderr)
    with open(path, "wb") as handle:
        handle.write(_header(session_id, "/home/me/big") + _lines(1, entries))
    store = SqliteStore(os.path.join(work, "big.db"))
    Syncer(store).sync_file(path)
    restores, befores, reads = [], [], []
    for rep in range(reps):
        for view, times in ((store, restores), (WholeReads(store), befores)):
            target = os.path.join(work, f"restored-{rep}")
            elapsed, result = timed(lambda target=target, view=view: restore(view, session_id, directory=target))
            times.append(elapsed)
            assert result.file.byte_exact and result.status == "written", result
            with open(result.path, "rb") as restored, open(path, "rb") as original:
                assert restored.read() == original.read()
            shutil.rmtree(target)

        def read_raw() -> int:
            with open(path, "rb") as handle:
                return len(handle.read())

        reads.append(timed(read_raw)[0])
    store.close()
    print("pi's load ...", file=sys.stderr)
    loads = pi(module, work, op="load", file=path, copy=True, warmup=1, iters=reps)
    out = {"entries": entries, "file_bytes": os.path.getsize(path), "restore_s": statistics.median(restores),
           "restore_before_s": statistics.median(befores), "read_s": statistics.median(reads),
           "pi_load_s": statistics.median(loads)}
    out["ratio_pi"] = out["restore_s"] / out["pi_load_s"]
    out["ratio_pi_before"] = out["restore_before_s"] / out["pi_load_s"]
    out["ratio_read"] = out["restore_s"] / out["read_s"]
    return out


def restore_lines(long: dict[str, Any]) -> list[str]:
    """The report lines of :func:`case_restore`."""
    return [f"restore of a {long['entries']:,}-entry session      {long['restore_s'] * 1000:9.1f} ms"
            f"   ({long['file_bytes']:,} bytes, byte for byte)",
            f"  the same, reading the session whole {long['restore_before_s'] * 1000:9.1f} ms   (before)",
            f"pi's load of the original file         {long['pi_load_s'] * 1000:9.1f} ms",
            f"raw read of the original file          {long['read_s'] * 1000:9.1f} ms"]


def report_restore(long: dict[str, Any]) -> int:
    """Print the restore case alone (``--restore-only``); 0 when it meets its target."""
    for line in restore_lines(long):
        print(line)
    ok = long["ratio_pi"] <= 1.5
    print(f"  [  info] restore / pi's load, reading the session whole (before): {long['ratio_pi_before']:.2f}")
    print(f"  [  info] restore / raw read: {long['ratio_read']:.1f}x")
    print(f"  [{'    OK' if ok else 'MISSED'}] restore / pi's load <= 1.5: {long['ratio_pi']:.2f}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the issue's sizes: 10,000 sessions, 100,000 entries")
    parser.add_argument("--files", type=int, default=None, help="sessions in the folder (default 1,000; --full 10,000)")
    parser.add_argument("--entries", type=int, default=None,
                        help="entries of the long session (default 10,000; --full 100,000)")
    parser.add_argument("--keep-newest", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--restore-only", action="store_true", help="only the restore of a long session")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed)")
    args = parser.parse_args(argv)
    files = args.files or (10_000 if args.full else 1_000)
    entries = args.entries or (100_000 if args.full else 10_000)
    module, version = ensure_reference(os.path.join(HERE, ".work"), log=lambda text: print(text, file=sys.stderr))
    work = args.dir or tempfile.mkdtemp(prefix="bench-agent-loop-")
    os.makedirs(work, exist_ok=True)
    try:
        started = time.perf_counter()
        folder = None if args.restore_only else case_folder(work, module, files, args.keep_newest, args.reps)
        long = case_restore(work, module, entries, args.reps)
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
        print(f"restore / archive beside pi {version} (medians of {args.reps}; {os.cpu_count()} CPUs; Python "
              f"{sys.version.split()[0]}; Node {node}; {time.perf_counter() - started:.0f} s; "
              f"load average {os.getloadavg()[0]:.1f})")
        if folder is None:
            return report_restore(long)
        print(f"pi's listing of {files:,} sessions            {folder['list_before_s'] * 1000:9.1f} ms")
        print(f"archive --keep-newest {folder['keep']} (trash)          {folder['archive_s'] * 1000:9.1f} ms"
              f"   ({folder['archived']:,} archived; first sync {folder['sync_s']:.1f} s)")
        print(f"pi's listing of the {folder['keep']} left              {folder['list_after_s'] * 1000:9.1f} ms")
        for label, what in [("90d", "--older-than 90d"), ("30d", "--older-than 30d"),
                            ("keep", f"--keep-newest {folder['keep']}")]:
            print(f"archive --dry-run {what:<19} {folder[f'dry_{label}_s'] * 1000:9.1f} ms   "
                  f"(would archive {folder[f'dry_{label}_would']:,}; session files opened "
                  f"{folder[f'dry_{label}_opened']:,})")
        print(f"  the same, reading each session whole {folder['dry_keep_before_s'] * 1000:9.1f} ms   (before)")
        for line in restore_lines(long):
            print(line)
        print("targets")
        checks = [
            ("restore / pi's load <= 1.5", long["ratio_pi"] <= 1.5, f"{long['ratio_pi']:.2f}"),
            ("archive --dry-run, nothing to verify, <= 2 s", folder["dry_90d_s"] <= 2,
             f"{folder['dry_90d_s']:.2f} s"),
            ("dry runs open only the files they would archive",
             all(folder[f"dry_{k}_opened"] <= folder[f"dry_{k}_would"] for k in ("90d", "30d", "keep")),
             ", ".join(f"{folder[f'dry_{k}_opened']}/{folder[f'dry_{k}_would']}" for k in ("90d", "30d", "keep"))),
        ]
        print(f"  [  info] pi's listing before / after archive: {folder['list_ratio']:.1f}x")
        print(f"  [  info] restore / raw read: {long['ratio_read']:.1f}x")
        print(f"  [  info] restore / pi's load, reading the session whole (before): {long['ratio_pi_before']:.2f}")
        for name, ok, value in checks:
            print(f"  [{'    OK' if ok else 'MISSED'}] {name}: {value}")
        return 0 if all(ok for _, ok, _ in checks) else 1
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
