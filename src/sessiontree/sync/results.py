"""What ``sessiontree sync`` reports: one :class:`FileResult` per source file (or
session of a source store) and the :class:`SyncReport` of a run (docs/sync.md, "Outcomes")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["STATUSES", "FileResult", "SyncReport"]

#: Outcomes, in the order summaries list them.
STATUSES = ("new", "grown", "unchanged", "in-progress", "replaced", "diverged", "rejected")


@dataclass
class FileResult:
    """What sync did with one source file (or one session of a source store).

    Attributes:
        path: the file (or ``<store url>#<session id>``).
        status: one of :data:`STATUSES`.
        session_id: the header id, once known.
        added: entries added to the store (``new``, ``grown``, ``replaced``).
        reason: why it was rejected or diverged, or a note; ``None`` otherwise.
        line: 1-based file line of the problem or of the first differing entry.
        entry_id: the first differing entry (``diverged``, ``replaced``).
        pending: bytes of an unfinished last line left for the next run.
        kept: store-only entries re-appended after the file's (``replaced``).
        superseded: stored entries replaced by the file's version of them (``replaced``).
        dropped: store-only entries that could not be re-appended, each
            ``{"id", "type", "reason"}`` (``replaced``).
        note: one line about a file read despite a flaw (glued records read
            apart, docs/sync.md "Glued records"); ``None`` otherwise.
        set_aside: a ``rejected``, ``diverged`` or ``in-progress`` result reported by an
            earlier run for the same unchanged file (:mod:`sessiontree.sync.setaside`):
            counted in the summary's "set aside", not shown again, not a failure.
    """

    path: str
    status: str
    session_id: str | None = None
    added: int = 0
    reason: str | None = None
    line: int | None = None
    entry_id: str | None = None
    pending: int = 0
    kept: int = 0
    superseded: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    set_aside: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON data (camelCase keys, as ``--json`` prints them)."""
        return {"path": self.path, "status": self.status, "sessionId": self.session_id, "added": self.added,
                "reason": self.reason, "line": self.line, "entryId": self.entry_id, "pending": self.pending,
                "kept": self.kept, "superseded": self.superseded, "dropped": self.dropped, "note": self.note,
                "setAside": self.set_aside}


@dataclass
class SyncReport:
    """The outcome of one sync run.

    Attributes:
        files: one result per file, in the order they were synced.
        notes: remarks on sources (a source that is the store itself, a missing folder).
        interrupted: the run was stopped before every file was done.
        left: files not done because of the interruption.
        indexed: entries whose derived data (the search index, the usage ledger) the
            run wrote: as it wrote new sessions (from the entries in hand, SQLite) or in
            its final settle; after it, searches read the index alone.
        index_left: that settle stopped early (a lock held too long, a write error):
            what is left stays pending, and searches and reports still see it.
        links_noted_before: symbolic links to folders not followed that an earlier run
            noted, pointing to the same place: counted in the summary, not noted again
            (docs/sync.md, "Quiet repeats").
    """

    files: list[FileResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    left: int = 0
    indexed: int = 0
    index_left: bool = False
    links_noted_before: int = 0

    def counts(self) -> dict[str, int]:
        """``{status: number of files}`` for every status (zeros included)."""
        counts = dict.fromkeys(STATUSES, 0)
        for result in self.files:
            counts[result.status] += 1
        return counts

    @property
    def added(self) -> int:
        """Entries added to the store, all files together."""
        return sum(result.added for result in self.files)

    @property
    def ok(self) -> bool:
        """Nothing new was rejected or left diverged (a result set aside, reported by an
        earlier run for the same unchanged file, is no new failure: docs/sync.md, "Exit status")."""
        return not any(r.status in ("rejected", "diverged") and not r.set_aside for r in self.files)

    @property
    def set_aside(self) -> int:
        """Results set aside: reported before, for the same unchanged file."""
        return sum(1 for r in self.files if r.set_aside)

    def summary(self) -> str:
        """One line: ``3 new, 1 grown (+12 entries), 40 unchanged, 0 in progress, ...``, then
        ``, N set aside (...)`` when results were set aside (they are not in the other counts)."""
        c = dict.fromkeys(STATUSES, 0)
        for result in self.files:
            if not result.set_aside:
                c[result.status] += 1
        grown = sum(result.added for result in self.files if result.status == "grown")
        parts = [f"{c['new']} new", f"{c['grown']} grown (+{grown} {'entry' if grown == 1 else 'entries'})", f"{c['unchanged']} unchanged",
                 f"{c['in-progress']} in progress"]
        if c["replaced"]:
            parts.append(f"{c['replaced']} replaced")
        parts += [f"{c['diverged']} diverged", f"{c['rejected']} rejected"]
        if self.set_aside:
            parts.append(f"{self.set_aside} set aside (reported before; --verbose lists them)")
        if self.links_noted_before:
            many = self.links_noted_before > 1
            parts.append(f"{self.links_noted_before} symbolic link{'s' if many else ''} to a folder not followed "
                         f"(noted before; --verbose lists {'them' if many else 'it'})")
        return ", ".join(parts)

    def index_line(self) -> str | None:
        """The line after the summary saying what the final settle did (``search ready (12
        entries indexed)``, or that it was left for later); ``None`` when it settled nothing."""
        if self.index_left:
            return "search indexing left for later (searches still find every entry)"
        if self.indexed:
            return f"search ready ({self.indexed} {'entry' if self.indexed == 1 else 'entries'} indexed)"
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON data: per-file results, the counts, entries added, notes."""
        data: dict[str, Any] = {"files": [r.to_dict() for r in self.files], **self.counts(),
                                "setAside": self.set_aside, "entriesAdded": self.added, "notes": list(self.notes),
                                "linksNotedBefore": self.links_noted_before}
        if self.interrupted:
            data.update(interrupted=True, left=self.left)
        if self.indexed or self.index_left:
            data.update(entriesIndexed=self.indexed, indexingLeft=self.index_left)
        return data


