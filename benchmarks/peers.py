"""The peers' totals beside ours on the same real sessions (docs/agents/README.md, "Peers").

Not a timing benchmark and not run in CI: it installs two other tools, builds a fake
home from the real corpus (``../shared/corpus``: Claude Code, Codex and Gemini CLI
files as their agents lay them out), runs each tool on it and prints, per agent, the
calls and tokens each one counts:

* **ccusage 20.0.24** (npm, installed into ``benchmarks/.work/npm``; newer versions ship
  no Linux binary): ``ccusage <agent> daily --json --offline`` and ``... session``;
* **agentsview 0.46.1** (PyPI, into the venv ``benchmarks/.work/agentsview-venv``):
  ``agentsview sync`` with ``AGENTSVIEW_NO_DAEMON=1`` (no daemon left running), then
  ``agentsview usage daily --all --json --offline --timezone UTC --no-sync --agent A``;
* **sessiontree** (this checkout, the running interpreter): ``sync`` into a new SQLite
  store, then ``stats --by agent --json``.

Every tool runs with ``HOME`` set to the fake home (``benchmarks/.work/peers-home``,
rebuilt on each run) and the agents' folder variables removed, so nothing outside
``benchmarks/.work`` is read or written. The peers report Codex and Gemini input
without the cached part; so does every column here ("input" = non-cached input).
The differences, each explained, are in docs/agents/README.md.

Usage::

    python benchmarks/peers.py                   # install when missing, run, print the table
    python benchmarks/peers.py --json            # the figures as JSON
    python benchmarks/peers.py --corpus PATH     # another corpus folder (same layout)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
CORPUS = HERE.parent.parent / "shared" / "corpus"
CCUSAGE = "ccusage@20.0.24"
AGENTSVIEW = "agentsview==0.46.1"
#: (our agent key, ccusage's subcommand, agentsview's --agent, the corpus folder, its place in the home).
AGENTS = (("claude-code", "claude", "claude", "claude-code/projects", ".claude/projects"),
          ("codex", "codex", "codex", "codex/sessions", ".codex/sessions"),
          ("gemini", "gemini", "gemini", "gemini/tmp", ".gemini/tmp"))
_AGENT_VARIABLES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "PI_CODING_AGENT_DIR",
                    "ATOMIC_CODING_AGENT_DIR", "SESSIONTREE_STORE")


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _AGENT_VARIABLES}
    env.update(HOME=str(home), **extra)
    return env


def _run(argv: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def install() -> tuple[Path, Path]:
    """The ccusage and agentsview executables, installed under ``benchmarks/.work`` when missing."""
    ccusage = WORK / "npm" / "node_modules" / ".bin" / "ccusage"
    if not ccusage.exists():
        _run(["npm", "install", "--prefix", str(WORK / "npm"), CCUSAGE])
    venv = WORK / "agentsview-venv"
    agentsview = venv / "bin" / "agentsview"
    if not agentsview.exists():
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", AGENTSVIEW])
    return ccusage, agentsview


def fake_home(corpus: Path) -> Path:
    """``benchmarks/.work/peers-home`` rebuilt from the corpus (copies, writable)."""
    home = WORK / "peers-home"
    if home.exists():
        shutil.rmtree(home)
    for _, _, _, source, target in AGENTS:
        if (corpus / source).is_dir():
            shutil.copytree(corpus / source, home / target)
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
    return home


def run_ccusage(ccusage: Path, home: Path) -> dict[str, dict[str, dict[str, int]]]:
    """``{report: {agent: totals}}`` for ``daily`` and ``session``."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for report in ("daily", "session"):
        out[report] = {}
        for agent, sub, _, _, _ in AGENTS:
            totals = json.loads(_run([str(ccusage), sub, report, "--json", "--offline"], _env(home)))["totals"]
            out[report][agent] = {"input": totals["inputTokens"], "output": totals["outputTokens"],
                                  "cacheRead": totals["cacheReadTokens"],
                                  "cacheWrite": totals["cacheCreationTokens"]}
    return out


def run_agentsview(agentsview: Path, home: Path) -> dict[str, dict[str, int]]:
    """``{agent: totals}`` of ``agentsview usage daily``."""
    env = _env(home, AGENTSVIEW_NO_DAEMON="1")
    _run([str(agentsview), "sync"], env)
    out: dict[str, dict[str, int]] = {}
    for agent, _, flag, _, _ in AGENTS:
        totals = json.loads(_run([str(agentsview), "usage", "daily", "--all", "--json", "--offline", "--timezone",
                                  "UTC", "--no-sync", "--agent", flag], env))["totals"]
        out[agent] = {"input": totals["inputTokens"], "output": totals["outputTokens"],
                      "cacheRead": totals["cacheReadTokens"], "cacheWrite": totals["cacheCreationTokens"]}
    return out


def run_sessiontree(home: Path) -> dict[str, Any]:
    """``{"sync": report counts, agent: totals}`` of ``sessiontree sync`` + ``stats --by agent``."""
    store = WORK / "peers-sessiontree.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    base = [sys.executable, "-m", "sessiontree", "--store", f"sqlite:///{store}"]
    done = subprocess.run([*base, "sync", "--json"], env=_env(home), capture_output=True, text=True, timeout=900,
                          check=False)
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    stats = json.loads(_run([*base, "stats", "--by", "agent", "--json"], _env(home)))
    out: dict[str, Any] = {"sync": {key: report.get(key) for key in ("new", "rejected", "diverged")}}
    for group in stats["groups"]:
        out[group["key"]] = {"calls": group["calls"], "input": group["inputTokens"],
                             "output": group["outputTokens"], "cacheRead": group["cacheReadTokens"],
                             "cacheWrite": group["cacheWriteTokens"]}
    return out


def table(figures: dict[str, Any]) -> str:
    """The Markdown table of docs/agents/README.md, "Peers"."""
    rows = ["| agent | source | calls | input (non-cached) | output | cache read | cache write |",
            "|---|---|---|---|---|---|---|"]
    names = {"claude-code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}
    for agent, _, _, _, _ in AGENTS:
        sources = [("ccusage session", figures["ccusage"]["session"].get(agent)),
                   ("ccusage daily", figures["ccusage"]["daily"].get(agent)),
                   ("agentsview", figures["agentsview"].get(agent)),
                   ("sessiontree", figures["sessiontree"].get(agent))]
        for k, (source, row) in enumerate(sources):
            label = names[agent] if k == 0 else ""
            if row is None:
                rows.append(f"| {label} | {source} | not read | | | | |")
                continue
            calls = f"{row['calls']:,}" if "calls" in row else "\u2013"
            rows.append(f"| {label} | {source} | {calls} | {row['input']:,} | {row['output']:,} | "
                        f"{row['cacheRead']:,} | {row['cacheWrite']:,} |")
    return "\n".join(rows)


def main() -> None:
    """Install the peers when missing, run the three tools, print the table (or ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus folder (default ../shared/corpus)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}")
    WORK.mkdir(parents=True, exist_ok=True)
    ccusage, agentsview = install()
    home = fake_home(args.corpus)
    figures = {"ccusage": run_ccusage(ccusage, home), "agentsview": run_agentsview(agentsview, home),
               "sessiontree": run_sessiontree(home)}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(table(figures))
        print(f"\nsessiontree sync: {figures['sessiontree']['sync']}")


if __name__ == "__main__":
    main()
