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


def shared_files() -> list[Path]:
    """Every session file of the whole corpus, sorted; empty when it is absent."""
    return sorted(SHARED.rglob("*.jsonl")) if SHARED.is_dir() else []
