"""The per-session check of ``verify()`` on the database stores (SQLite, PostgreSQL).

One algorithm, so ``sessiontree check --store`` gives a session the same verdict
whichever database holds it. The store reads its rows and says how its columns
compare; :func:`verify_stored_session` decides, in this order:

1. the header record: its checksum (``hash-mismatch``), then that it parses, is
   a valid header and its ``id`` is the key it is stored under (``invalid-record``);
2. each entry record in file order: its checksum (``hash-mismatch``), that it
   parses and is a valid entry (``invalid-record``), and that the columns copied
   out of it still match its JSON (``column-drift``);
3. when every record is sound: the file checker's rules on the session's JSONL
   form (:func:`~sessiontree.stores.storable.file_rule_problems`), then whether the
   derived data (entry count, header copies, listing state, ``message_texts``,
   and each derived index's rows for the session: :class:`DerivedCheck`) equals a
   rebuild from the records (one ``metadata-drift`` problem naming each
   difference). A rebuild from damaged records would only repeat the damage, so
   step 3 is skipped when step 1 or 2 found anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sessiontree.core.listing import InfoAccumulator
from sessiontree.errors import InvalidSessionError
from sessiontree.format.codec import validate_entry, validate_header
from sessiontree.stores.base import StoreProblem
from sessiontree.stores.storable import file_rule_problems

__all__ = ["HEADER_COLUMN_NAMES", "DerivedCheck", "StoredRecord", "StoredSession", "row_drift",
           "verify_stored_session"]

#: The header copies every database store keeps in ``sessions``, in the order
#: :attr:`StoredSession.header_columns` gives them.
HEADER_COLUMN_NAMES = ("created_at", "cwd", "parent_session_id", "classified")


class DerivedCheck(Protocol):
    """One derived index's rows for one session compared with a rebuild (the search
    index, the usage ledger): fed every sound entry in file order, then asked for
    the differences."""

    def add(self, seq: int, entry: dict[str, Any]) -> None:
        """Take one parsed, valid entry (its ``seq``)."""

    def drift(self) -> list[str]:
        """``["<table> <what is stored> (rebuilt: <what a rebuild gives>)", ...]``; empty when equal."""


def row_drift(table: str, stored: Sequence[Any], rebuilt: Sequence[Any]) -> list[str]:
    """How a table's rows (in a fixed order) differ from a rebuild's, in the words of a
    ``metadata-drift`` problem: ``[]`` when equal, else one item naming the table and
    the row counts, or how many rows differ when the counts are equal."""
    if list(stored) == list(rebuilt):
        return []
    if len(stored) != len(rebuilt):
        return [f"{table} ({len(stored)} rows; rebuilt: {len(rebuilt)})"]
    differ = sum(a != b for a, b in zip(stored, rebuilt, strict=True))
    return [f"{table} ({differ} of {len(stored)} rows differ from a rebuild)"]


@dataclass(frozen=True)
class StoredRecord:
    """One entry record as a database store holds it.

    Attributes:
        seq: its ``seq`` column (the key of its ``message_texts`` row).
        entry_id: its ``id`` column, for messages.
        columns: its copied ``(id, parent_id, type, timestamp)`` columns as the
            store compares them with ``copied_columns(entry)``.
        text: the stored JSON bytes.
        intact: whether the bytes match the checksum recorded when it was written
            (``True`` where the schema records none).
    """

    seq: int
    entry_id: str
    columns: tuple[Any, ...]
    text: bytes
    intact: bool


@dataclass(frozen=True)
class StoredSession:
    """The ``sessions`` row of a session and how the store rebuilds its derived parts.

    Attributes:
        header_text: the stored header record's bytes.
        header_intact: whether they match their recorded checksum.
        entry_count: the stored ``entry_count``.
        header_columns: the stored header copies (:data:`HEADER_COLUMN_NAMES`), as
            the store compares them.
        parse: ``(record bytes, JSONL line) -> dict``; raises ``InvalidSessionError``
            for a record that is not a JSON object.
        copied_columns: ``entry -> (id, parent_id, type, timestamp)`` as the store
            would copy them (compared with :attr:`StoredRecord.columns`).
        rebuilt_header_columns: ``header -> copies`` as the store would write them.
        state_drift: ``rebuilt accumulator -> ["<what> <stored> (rebuilt: <value>)", ...]``
            for the listing state the row holds (its texts already cleared).
        stored_texts: ``() -> [(seq, text), ...]``: the session's ``message_texts`` rows.
        derived: a :class:`DerivedCheck` per derived index the store keeps.
    """

    header_text: bytes
    header_intact: bool
    entry_count: int
    header_columns: Sequence[Any]
    parse: Callable[[bytes, int], dict[str, Any]]
    copied_columns: Callable[[dict[str, Any]], tuple[Any, ...]]
    rebuilt_header_columns: Callable[[dict[str, Any]], Sequence[Any]]
    state_drift: Callable[[InfoAccumulator], list[str]]
    stored_texts: Callable[[], list[tuple[int, str]]]
    derived: Sequence[DerivedCheck] = ()


def verify_stored_session(session_id: str, where: str, stored: StoredSession,
                          records: Iterable[StoredRecord]) -> list[StoreProblem]:
    """The problems of one stored session (the module docstring gives the checks).

    Args:
        session_id: the session.
        where: ``<store url>#<session id>``, the ``path`` of every problem.
        stored: its ``sessions`` row and the store's rebuild rules.
        records: its entry records in file order (consumed once).

    Returns:
        :class:`~sessiontree.stores.base.StoreProblem` rows (``severity`` ``"error"``
        for the store's own checks; the file rules give their own), in the order found.
    """
    problems: list[StoreProblem] = []

    def problem(code: str, message: str, line: int | None = None, entry_id: str | None = None) -> None:
        problems.append(StoreProblem(code, message, "error", session_id, line, entry_id, where))

    header: dict[str, Any] | None = None
    if not stored.header_intact:
        problem("hash-mismatch", "the stored header does not match the checksum recorded when it was written", 1)
    else:
        try:
            header = stored.parse(stored.header_text, 1)
            validate_header(header)
        except InvalidSessionError as exc:
            problem("invalid-record", f"header: {exc.reason}", 1)
            header = None
        if header is not None and header["id"] != session_id:
            problem("invalid-record", f"header: its id {header['id']!r} is not the key it is stored under", 1)
            header = None
    info = InfoAccumulator()
    texts: list[tuple[int, str]] = []
    jsonl = [stored.header_text]  # the session's JSONL form, for the file rules
    count = 0
    for record in records:
        count += 1
        line = count + 1
        if not record.intact:
            problem("hash-mismatch", f"entry {record.entry_id} does not match the checksum recorded when it was "
                    "written", line, record.entry_id)
            continue
        try:
            entry = stored.parse(record.text, line)
            validate_entry(entry)
        except InvalidSessionError as exc:
            problem("invalid-record", f"entry {record.entry_id}: {exc.reason}", line, record.entry_id)
            continue
        if record.columns != stored.copied_columns(entry):
            problem("column-drift", f"entry {record.entry_id}: the id/parent_id/type/timestamp columns differ "
                    "from its JSON", line, record.entry_id)
        listed = info.add(entry)
        if listed is not None:
            texts.append((record.seq, listed))
        for check in stored.derived:
            check.add(record.seq, entry)
        jsonl.append(record.text)
    if problems or header is None:
        return problems  # a rebuild from damaged records would only repeat the damage
    # The file rules (dangling parents, tool pairing, ...) as check gives them for
    # this session's JSONL form: the same verdict as on a JSONL store.
    problems.extend(file_rule_problems(b"\n".join(jsonl) + b"\n", session_id, where))
    drift = []
    if stored.entry_count != count:
        drift.append(f"entry_count {stored.entry_count} (rebuilt: {count})")
    for name, value, rebuilt in zip(HEADER_COLUMN_NAMES, stored.header_columns,
                                    stored.rebuilt_header_columns(header), strict=True):
        if value != rebuilt:
            drift.append(f"{name} {value!r} (rebuilt: {rebuilt!r})")
    info.texts.clear()
    drift.extend(stored.state_drift(info))
    stored_texts = stored.stored_texts()
    if stored_texts != texts:
        drift.append(f"message_texts ({len(stored_texts)} rows; rebuilt: {len(texts)})")
    for check in stored.derived:
        drift.extend(check.drift())
    if drift:
        problem("metadata-drift", "derived data differs from a rebuild from the entries: "
                + "; ".join(drift) + " (rebuilding the metadata from the entries repairs it)")
    return problems
