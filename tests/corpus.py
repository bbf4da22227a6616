"""Where the tests find the real session files written by the original agent.

* :data:`VENDORED`: ``tests/data/corpus``, in the repository: the smallest file
  (``pi-v1/pi-mono-large-session.jsonl``), so the tests that need only it run
  in a bare checkout.
* :data:`SHARED`: ``../shared/corpus`` beside the checkout: the whole corpus
  (both files, 3.3 MB). Tests that need it are marked ``corpus`` and skip,
  with :data:`SHARED_REASON`, when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
VENDORED = TESTS / "data" / "corpus"
SHARED = TESTS.parent.parent / "shared" / "corpus"

#: Session files, relative to a corpus directory.
LARGE_SESSION = "pi-v1/pi-mono-large-session.jsonl"
BEFORE_COMPACTION = "pi-v1/pi-mono-before-compaction.jsonl"

#: Why a test that needs the whole corpus was skipped.
SHARED_REASON = f"the whole corpus ({SHARED}) is not beside the checkout"
HAS_SHARED = (SHARED / BEFORE_COMPACTION).is_file()

#: The marks of a test that reads the whole corpus: ``corpus``, and skipped when it is absent
#: (for ``pytestmark`` and ``pytest.param(..., marks=NEEDS_SHARED)``).
NEEDS_SHARED = [pytest.mark.corpus, pytest.mark.skipif(not HAS_SHARED, reason=SHARED_REASON)]


def needs_shared(test):
    """Decorator: :data:`NEEDS_SHARED` on one test."""
    for mark in NEEDS_SHARED:
        test = mark(test)
    return test


def vendored(name: str) -> Path:
    """A file of the vendored corpus (always present in the repository)."""
    return VENDORED / name


def shared(name: str = "") -> Path:
    """A file (or, with no name, the directory) of the whole corpus beside the checkout."""
    return SHARED / name if name else SHARED


#: The folders of the shared corpus that hold other agents' files (Claude Code, Codex, Gemini CLI),
#: laid out as each agent lays out its own folder; FOREIGN.md beside them gives their figures.
FOREIGN_AGENTS = ("claude-code", "codex", "gemini")


def shared_files() -> list[Path]:
    """Every pi session file of the whole corpus (not the other agents' folders), sorted; empty when absent."""
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.rglob("*.jsonl") if p.relative_to(SHARED).parts[0] not in FOREIGN_AGENTS)


def shared_pi_folder() -> Path:
    """The folder of the whole corpus holding pi files only (``pi-v1``), for commands given a folder."""
    return SHARED / "pi-v1"


def foreign_files(agent: str) -> list[Path]:
    """Every file of one other agent's folder in the whole corpus (``claude-code``, ``codex``, ``gemini``), sorted."""
    folder = SHARED / agent
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
