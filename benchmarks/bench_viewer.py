"""How fast the viewer's session page of a large session becomes usable in Chromium.

Usage::

    .venv/bin/python benchmarks/bench_viewer.py [--entries 100000] [--reps 3]

Generates a session with ``generate.py`` (cached in ``benchmarks/.work/``),
imports it into a scratch SQLite store, serves it on a free loopback port and
opens its page in headless Chromium (``/usr/bin/chromium``). Reported, per
repetition:

* ``cold``: first load after the server started: the store read, the tree
  layout and the first conversation window are all computed for this request;
* ``warm``: a reload (the server reuses the session it read, since the store
  did not change);
* for each, milliseconds from navigation start to the ``sessiontree-ready``
  mark that ``static/app.js`` sets once the tree is drawn and the
  conversation is shown, plus the server's own time for the HTML.

Not a test: numbers depend on the machine (and on what else runs on it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
from web_support import chromium, running_server  # noqa: E402

from sessiontree import SessionManager, open_store  # noqa: E402


def ready_ms(driver) -> float:
    """Milliseconds from navigation start to the ``sessiontree-ready`` mark."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        marks = driver.execute_script(
            "return performance.getEntriesByName('sessiontree-ready').map(m => m.startTime)")
        if marks:
            return float(marks[0])
        time.sleep(0.02)
    raise RuntimeError("the page never became ready")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    work = HERE / ".work" / "viewer"
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"session-{args.entries}.jsonl"
    if not source.exists():
        generate.write_session(source, generate.SessionSpec(entries=args.entries, seed=1))
    print(f"session: {source} ({source.stat().st_size / 1e6:.0f} MB, {args.entries} entries)")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/s.db", create=True)
        manager = SessionManager.import_from_jsonl(source, None, store)
        session_id = manager.get_session_id()
        print(f"active branch: {len(manager.get_branch())} entries; tips: "
              f"{sum(1 for _ in manager.get_entries()) and len({e['id'] for e in manager.get_entries()} - {e.get('parentId') for e in manager.get_entries()})}")
        # Where a cold load goes, measured in this process.
        from sessiontree.stores.memory import MemoryStore
        from sessiontree.web import view

        t0 = time.perf_counter()
        parsed = store.read(session_id)
        t1 = time.perf_counter()
        loaded = SessionManager(MemoryStore(), parsed.header, parsed.entries, cwd="/", saved=True)
        tree = view.build_tree_data(loaded, summaries=False)
        t2 = time.perf_counter()
        view.build_conversation(loaded, None, "raw")
        t3 = time.perf_counter()
        print(f"cold parts: store.read {t1 - t0:.2f} s, tree layout ({len(tree.rows)} rows) {t2 - t1:.2f} s, "
              f"first conversation window {t3 - t2:.2f} s")
        del parsed, loaded, tree
        with chromium() as driver:
            for rep in range(args.reps):
                with running_server(store) as url:
                    for label in ("cold", "warm"):
                        started = time.perf_counter()
                        driver.get(f"{url}/s/{session_id}")
                        total = ready_ms(driver)
                        nav = driver.execute_script(
                            "const n = performance.getEntriesByType('navigation')[0];"
                            "return [n.responseStart, n.responseEnd, n.domContentLoadedEventEnd, n.transferSize]")
                        rows = driver.execute_script("return document.querySelectorAll('#tree .row').length")
                        print(f"rep {rep + 1} {label}: usable after {total:7.0f} ms "
                              f"(first byte {nav[0]:.0f} ms, HTML done {nav[1]:.0f} ms, "
                              f"DOMContentLoaded {nav[2]:.0f} ms, page {nav[3] / 1e6:.1f} MB, "
                              f"{rows} tree rows drawn; wall {time.perf_counter() - started:.2f} s)")
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
