"""How fast the viewer's session page of a large session becomes usable in Chromium.

Usage::

    .venv/bin/python benchmarks/bench_viewer.py [--entries 100000] [--reps 3]

Generates a session with ``generate.py`` (cached in ``benchmarks/.work/``),
imports it into a scratch SQLite store, serves it on a free loopback port and
opens its page in headless Chromium (``/usr/bin/chromium``). Reported, per
repetition:

* ``first visit``: first load after the server started: everything the page
  needs is read and computed for this request;
* ``cached``: a reload (the server reuses what it read: the store did not change);
* for each, **usable**: milliseconds from navigation start to the
  ``sessiontree-ready`` mark, which ``static/app.js`` sets once the tree's
  first rows and the last messages of the active branch are drawn (the
  benchmark checks both are there), and then the time a click on a drawn
  tree row takes to show that entry in the conversation (it must be
  responsive, not just drawn).

``--src DIR`` runs another source tree (main's, for the "before" rows); its
store is the same SQLite file (``benchmarks/.work/viewer/store-N.db``).

Not a test: numbers depend on the machine (and on what else runs on it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# --src DIR: measure another tree's code (e.g. main's, for "before" rows).
SRC = Path(sys.argv[sys.argv.index("--src") + 1]) if "--src" in sys.argv else HERE.parent / "src"
if "--src" in sys.argv:
    del sys.argv[sys.argv.index("--src"):sys.argv.index("--src") + 2]
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
from sessiontree import SessionManager, open_store  # noqa: E402
from web_support import chromium, running_server  # noqa: E402


def ready_ms(driver) -> float:
    """Milliseconds from navigation start to the ``sessiontree-ready`` mark."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        marks = driver.execute_script(
            "return performance.getEntriesByName('sessiontree-ready').map(m => m.startTime)")
        if marks:
            return float(marks[0])
        time.sleep(0.02)
    raise RuntimeError("the page never became ready")


def usable_ms(driver) -> tuple[float, float, int, int]:
    """``(ready, click, tree rows drawn, messages drawn)``: the ``sessiontree-ready``
    mark (tree rows and the last messages of the active branch drawn), then the
    milliseconds from a click on a tree row off the shown branch's end to its
    entry being drawn and marked in the conversation pane."""
    ready = ready_ms(driver)
    rows = driver.execute_script("return document.querySelectorAll('#tree .row[data-row]').length")
    items = driver.execute_script("return document.querySelectorAll('#conv .item').length")
    if rows == 0 or items == 0:
        raise RuntimeError(f"not usable: {rows} tree rows, {items} messages drawn")
    started = time.perf_counter()
    driver.execute_script(
        "const rows = document.querySelectorAll('#tree .row[data-row]');"
        "rows[Math.floor(rows.length / 3)].click();")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if driver.execute_script("return !!document.querySelector('#conv .item.target')"):
            return ready, (time.perf_counter() - started) * 1000, rows, items
        time.sleep(0.005)
    raise RuntimeError("a click on a tree row showed nothing")


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
    db = work / f"store-{args.entries}.db"
    if not db.exists():
        store = open_store(f"sqlite:///{db}", create=True)
        SessionManager.import_from_jsonl(source, None, store)
        store.close()
    store = open_store(f"sqlite:///{db}", readonly=True)
    session_id = store.session_ids()[0]
    print(f"code: {SRC}")
    if hasattr(store, "read_skeleton"):
        # Where a first visit goes, measured in this process.
        from sessiontree.web import views as view

        t0 = time.perf_counter()
        parsed = store.read_skeleton(session_id)
        t1 = time.perf_counter()
        loaded = SessionManager.from_parsed(parsed)
        tree = view.build_tree_data(loaded, summaries=False)
        tree.loader = lambda ids: store.read_entries(session_id, ids)
        t2 = time.perf_counter()
        tree.window(leaf=loaded.get_leaf_id(), find=loaded.get_leaf_id())
        path = loaded.get_branch()
        view.build_branch_window(path, lambda ids: store.read_entries(session_id, ids), limit=60)
        t3 = time.perf_counter()
        print(f"first-visit parts: store.read_skeleton {t1 - t0:.2f} s, tree layout ({len(tree.rows)} rows) "
              f"{t2 - t1:.2f} s, first tree window and conversation window {t3 - t2:.2f} s")
        del parsed, loaded, tree, path
    with chromium() as driver:
        driver.set_window_size(1400, 900)
        for rep in range(args.reps):
            with running_server(store) as url:
                for label in ("first visit", "cached"):
                    started, cpu = time.perf_counter(), time.process_time()
                    driver.get(f"{url}/s/{session_id}")
                    total, click, rows, items = usable_ms(driver)
                    # CPU seconds of this process (the server, plus the driver's polling) until
                    # usable and the click answered: less sensitive to other jobs than wall time.
                    cpu = time.process_time() - cpu
                    nav = driver.execute_script(
                        "const n = performance.getEntriesByType('navigation')[0];"
                        "return [n.responseStart, n.responseEnd, n.domContentLoadedEventEnd, n.transferSize]")
                    print(f"rep {rep + 1} {label:11}: usable after {total:7.0f} ms, click answered in {click:5.0f} ms "
                          f"(first byte {nav[0]:.0f} ms, HTML done {nav[1]:.0f} ms, page {nav[3] / 1e6:.2f} MB, "
                          f"{rows} tree rows and {items} messages drawn; wall {time.perf_counter() - started:.2f} s, "
                          f"server process CPU {cpu:.2f} s)")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
