"""The secret scan's speed (issue 42, target 3; docs/secrets.md, "Speed").

    .venv/bin/python benchmarks/bench_secrets.py                    # real corpus + 100,000 entries
    .venv/bin/python benchmarks/bench_secrets.py --entries 20000 --no-export
    .venv/bin/python benchmarks/bench_secrets.py --scan-src /tmp/old/src --no-export   # and an older checkout

Measured in CPU seconds (``time.process_time``; the machine is shared, so wall time says
little), on the same input for both paths:

* ``scan_entries`` (header, mapped text, verbatim records) of every session of
  ``../shared/corpus`` (pi, Claude Code, Codex, Gemini CLI files, mapped as ``secrets`` reads
  them), and of one generated 100,000-entry session (``benchmarks/generate.py``, seed 1);
  MB/s counts the session files' bytes. ``fast`` is :func:`sessiontree.core.secrets.scan_entries`
  (the RE2 candidate pass, plugins on candidates, paths only for strings with a secret),
  ``reference`` the plain path (:func:`~sessiontree.core.secrets.scan_entries_reference`:
  the plugin loop on every string); their findings are checked equal.
* ``sessiontree export --format markdown`` of the generated session, redacted (the default)
  and ``--no-redact``, each a fresh process against a SQLite store (CPU of the child process).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if "--child-scan" not in sys.argv:  # a child scans with the sources PYTHONPATH names
    sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
from sessiontree.core import secrets  # noqa: E402
from sessiontree.format.codec import read_session_file  # noqa: E402
from sessiontree.format.foreign import map_foreign  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"


def corpus_sessions() -> list[tuple[dict, list, int]]:
    """``(header, entries, file bytes)`` of every session file of the shared corpus."""
    out = []
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or path.suffix not in (".jsonl", ".json"):
            continue
        data = path.read_bytes()
        if "pi-v1" in path.parts:
            parsed = read_session_file(path)
            out.append((parsed.header, parsed.entries, len(data)))
            continue
        mapped = map_foreign(data, str(path))
        if mapped is not None:
            out.append((mapped.header, mapped.entries, len(data)))
    return out


def scan(sessions: list[tuple[dict, list, int]], path_name: str) -> tuple[float, list]:
    """CPU seconds of one path (``scan_entries`` or ``scan_entries_reference``) over ``sessions``."""
    run = getattr(secrets, path_name)
    start = time.process_time()
    found = [run(entries, header) for header, entries, _ in sessions]
    return time.process_time() - start, found


def measure(label: str, sessions: list[tuple[dict, list, int]], reference: bool) -> None:
    size = sum(n for _, _, n in sessions) / 1e6
    fast, found = scan(sessions, "scan_entries")
    line = f"{label}: {size:.1f} MB, {sum(map(len, found))} findings; fast {fast:.2f} s CPU = {size / fast:.1f} MB/s"
    if reference:
        slow, expected = scan(sessions, "scan_entries_reference")
        assert found == expected, f"{label}: the paths' findings differ"
        line += f"; reference {slow:.2f} s CPU = {size / slow:.1f} MB/s; {slow / fast:.1f}x, findings equal"
    print(line, flush=True)


def child_scan() -> int:
    """Child mode (``--child-scan``): CPU seconds of ``scan_entries`` over the corpus with the
    sessiontree on ``PYTHONPATH`` (parsing not counted; the least of three passes), and a
    digest of its findings."""
    import hashlib
    import json

    sessions = corpus_sessions()
    cpus = []
    for _ in range(3):  # the first pass also pays the process's warm-up (regex caches, allocator)
        start = time.process_time()
        found = [secrets.scan_entries(entries, header) for header, entries, _ in sessions]
        cpus.append(time.process_time() - start)
    cpu = min(cpus)
    digest = hashlib.sha256(json.dumps([[f.as_dict() for f in one] for one in found]).encode()).hexdigest()[:12]
    print(json.dumps({"cpu": cpu, "mb": sum(n for _, _, n in sessions) / 1e6, "findings": sum(map(len, found)),
                      "digest": digest, "module": secrets.__file__}))
    return 0


def compare_scan(old_src: str, reps: int) -> None:
    """The corpus scan of ``old_src``'s sessiontree and this checkout's, alternating in fresh
    processes (``reps`` each; the minimum and the median kept), findings checked equal."""
    import json

    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for _ in range(reps):
        for name, src in (("old", old_src), ("new", str(ROOT / "src"))):
            env = dict(os.environ, PYTHONPATH=src)
            out = subprocess.run([sys.executable, __file__, "--child-scan"], check=True, capture_output=True,
                                 text=True, env=env).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    assert {r["digest"] for r in runs["old"] + runs["new"]} == {runs["old"][0]["digest"]}, "findings differ"
    for name, results in runs.items():
        cpus = sorted(r["cpu"] for r in results)
        mb = results[0]["mb"]
        print(f"real corpus, {name} ({results[0]['module']}): {mb:.1f} MB, {results[0]['findings']} findings; "
              f"min {cpus[0]:.3f} s CPU = {mb / cpus[0]:.1f} MB/s, median {cpus[len(cpus) // 2]:.3f} s = "
              f"{mb / cpus[len(cpus) // 2]:.1f} MB/s", flush=True)
    print(f"findings equal (digest {runs['old'][0]['digest']}); load average {os.getloadavg()[0]:.2f}")


def child_cpu(argv: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--no-reference", action="store_true", help="skip the slow reference path")
    parser.add_argument("--no-export", action="store_true", help="skip the export commands")
    parser.add_argument("--reps", type=int, default=3, help="export runs of each kind (the minimum is kept)")
    parser.add_argument("--export-src", default=str(ROOT / "src"),
                        help="the sessiontree sources the export commands run (an older checkout's, to compare)")
    parser.add_argument("--no-scan", action="store_true", help="only the export commands")
    parser.add_argument("--scan-src", help="also scan the corpus with an older checkout's sources (its src "
                        "folder), alternating with this one in fresh processes")
    parser.add_argument("--scan-reps", type=int, default=7, help="runs of each side with --scan-src")
    parser.add_argument("--child-scan", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_scan:
        return child_scan()
    from sessiontree.core import secretscan

    print(f"load average {os.getloadavg()[0]:.2f}; RE2 pass {'on' if secretscan._SET is not None else 'off'}")
    if CORPUS.is_dir() and not args.no_scan:
        measure("real corpus (all agents)", corpus_sessions(), not args.no_reference)
        if args.scan_src:
            compare_scan(args.scan_src, args.scan_reps)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        generate.write_session(path, generate.SessionSpec(entries=args.entries, seed=1))
        parsed = read_session_file(path)
        if not args.no_scan:
            measure(f"generated {args.entries:,}-entry session", [(parsed.header, parsed.entries, path.stat().st_size)],
                    not args.no_reference)
        if args.no_export:
            return 0
        store = str(Path(tmp) / "s.db")
        env = dict(os.environ, PYTHONPATH=args.export_src)
        cli = [sys.executable, "-m", "sessiontree", "--store", store]
        subprocess.run([*cli, "import", str(path)], check=True, stdout=subprocess.DEVNULL, env=env)
        sid = parsed.header["id"]
        plain = min(child_cpu([*cli, "export", sid, "--format", "markdown", "--no-redact"], env)
                    for _ in range(args.reps))
        redacted = min(child_cpu([*cli, "export", sid, "--format", "markdown"], env) for _ in range(args.reps))
        print(f"export --format markdown of it ({args.export_src}): --no-redact {plain:.2f} s CPU, redacted {redacted:.2f} s CPU, "
              f"ratio {redacted / plain:.2f}x (target 1.5x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
