"""Secrets in one session's entries: finding them and redacting them (docs/secrets.md).

Pure functions over a header and a list of entries: no I/O, no store. The scanner
(one string: :mod:`sessiontree.core.secretscan`) reads the strings of
:mod:`sessiontree.core.secretfields`; this module reports and replaces what it finds,
and re-exports both modules' public names. The header's text (``cwd``) is scanned as an
entry's is (path ``header.cwd``); a secret a verbatim source record repeats from the
mapped text is reported once, at the mapped field (docs/secrets.md, "Verbatim source
records").

A :class:`Finding` never holds the secret, only a masked preview
(:func:`mask`). Redaction (:class:`Redactor`) returns new entries with each
secret replaced by ``[REDACTED:kind:N]``: the same secret gets the same
placeholder everywhere in one export, ids and structure are unchanged, and
the header gains the :data:`HEADER_MARKER` field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sessiontree.core.secretfields import (
    FOREIGN_META,
    PROTOCOL_KEYS,
    STRUCTURAL_KEYS,
    FieldHits,
    _entry_hits,
    _entry_id,
    _path,
    _record,
    iter_raw_fields,
    iter_text_fields,
    unscannable,
)
from sessiontree.core.secretscan import (
    ENTROPY_MIN,
    OWN_RULES,
    PLUGIN_KINDS,
    Hit,
    _merge,
    scan_text,
    scan_text_reference,
)
from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession
from sessiontree.format.types import Entry

__all__ = [
    "ENTROPY_MIN",
    "FOREIGN_META",
    "HEADER_INDEX",
    "HEADER_MARKER",
    "OWN_RULES",
    "PLUGIN_KINDS",
    "PROTOCOL_KEYS",
    "STRUCTURAL_KEYS",
    "Finding",
    "Hit",
    "Redactor",
    "iter_raw_fields",
    "iter_text_fields",
    "mask",
    "redact_parsed",
    "redact_text",
    "scan_entries",
    "scan_entries_reference",
    "scan_text",
    "scan_text_reference",
    "unscannable",
]

#: Header field of a redacted export: ``{"tool": "sessiontree", "placeholders": N}``
#: (N distinct secrets replaced). Readers keep unknown header fields (docs/secrets.md).
HEADER_MARKER = "redacted"

#: Shortest secret that is also replaced where the scanner did not flag it (shorter
#: ones, such as a four-letter URL password, only where found: "pass" is also a word).
GLOBAL_REPLACE_MIN = 8


@dataclass(frozen=True)
class Finding:
    """One secret in one field of one entry, as reported: no secret, only ``preview``.

    ``entry_id`` is the entry's id (``None`` when the entry has none), ``path`` the
    field (``message.content[2].text``), ``kind`` the rule's kind, ``preview`` the
    masked secret (:func:`mask`), ``index`` the entry's position in the session.
    """

    entry_id: str | None
    index: int
    path: str
    kind: str
    preview: str

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON data (``--json`` output)."""
        return {"entryId": self.entry_id, "index": self.index, "path": self.path,
                "kind": self.kind, "preview": self.preview}


_KNOWN_PREFIX = re.compile(
    r"^(?:sk-ant-(?:api|admin)\d\d-|sk-ant-|sk-(?:proj|svcacct|admin)-|sk_live_|rk_live_|github_pat_|"
    r"gh[pousr]_|glpat-|xox[abposr]-|AKIA|ASIA|AIza|hf_|npm_|pypi-|SG\.|eyJ|-----BEGIN [A-Z ]*-----)")


def mask(secret: str) -> str:
    """A preview that does not reveal ``secret``: its public prefix (``sk-ant-``,
    ``ghp_``, ``AKIA``...) and last four characters when it has at least 20,
    else only its length (``...(9 chars)``)."""
    if len(secret) < 20:
        return f"...({len(secret)} chars)"
    prefix = _KNOWN_PREFIX.match(secret)
    head = prefix.group(0) if prefix else ""
    return f"{head}...{secret[-4:]}"


#: Index a finding in the header gets (entries count from 0); its path starts ``header.``.
HEADER_INDEX = -1


def scan_entries(entries: Iterable[Entry], header: Mapping[str, Any] | None = None) -> list[Finding]:
    """The findings of a session, in entry and field order (one per secret occurrence):
    the header's first when ``header`` is given (index :data:`HEADER_INDEX`, paths
    ``header.cwd``), then each entry's mapped text, then what its verbatim source record
    holds that no mapped field of the session shows (a secret the record repeats folds
    into the mapped field's finding: docs/secrets.md, "Verbatim source records").
    The same findings as :func:`scan_entries_reference`, at tens of MB/s."""
    return _findings(entries, header, lambda entry: _entry_hits(entry, _record(entry)), scan_text)


def scan_entries_reference(entries: Iterable[Entry], header: Mapping[str, Any] | None = None) -> list[Finding]:
    """:func:`scan_entries` by the plain path: :func:`scan_text_reference` (every gated
    plugin on the whole string) on every string :func:`iter_text_fields` and
    :func:`iter_raw_fields` give. The reference the fast path is proven equal to (tests,
    ``benchmarks/bench_secrets.py``); a few MB/s."""
    def hits(entry: Entry) -> tuple[FieldHits, FieldHits]:
        return ([(path, text, found) for path, text in iter_text_fields(entry) if (found := scan_text_reference(text))],
                [(path, text, found) for path, text in iter_raw_fields(entry) if (found := scan_text_reference(text))])
    return _findings(entries, header, hits, scan_text_reference)


def _findings(entries: Iterable[Entry], header: Mapping[str, Any] | None,
              entry_hits: Callable[[Entry], tuple[FieldHits, FieldHits]],
              scan: Callable[[str], list[Hit]]) -> list[Finding]:
    entries = list(entries)
    findings: list[Finding] = []
    mapped: set[str] = set()
    raw_hits: list[list[tuple[str, str, str]]] = []
    if header is not None:
        for path, text in iter_text_fields(dict(header)):
            for hit in scan(text):
                secret = text[hit.start:hit.end]
                mapped.add(secret)
                findings.append(Finding(None, HEADER_INDEX, f"header.{path}", hit.kind, mask(secret)))
    per_entry: list[list[Finding]] = []
    for index, entry in enumerate(entries):
        entry_id = _entry_id(entry)
        own: list[Finding] = []
        mapped_hits, record_hits = entry_hits(entry)
        for path, text, hits in mapped_hits:
            for hit in hits:
                secret = text[hit.start:hit.end]
                mapped.add(secret)
                own.append(Finding(entry_id, index, path, hit.kind, mask(secret)))
        per_entry.append(own)
        raw_hits.append([(path, hit.kind, text[hit.start:hit.end]) for path, text, hits in record_hits for hit in hits])
    for index, entry in enumerate(entries):
        findings.extend(per_entry[index])
        findings.extend(Finding(_entry_id(entry), index, path, kind, mask(secret))
                        for path, kind, secret in raw_hits[index] if secret not in mapped)
    return findings


class Redactor:
    """Placeholders of one export: each distinct secret gets ``[REDACTED:kind:N]``,
    N counting from 1 per kind in order of first sight, the same for every
    occurrence (docs/secrets.md).

    Use :meth:`redact_entries` once per export: a first pass finds every
    secret, the second replaces them, so a secret found in one field is also
    replaced where it occurs unflagged in another (when at least
    :data:`GLOBAL_REPLACE_MIN` characters long).

    A verbatim source record (``foreign.raw``) is redacted too: left as it is when
    it holds no secret, else written again from its redacted JSON value (compact,
    as the agents write); a ``foreign.rawBase64`` record becomes ``foreign.raw``,
    its decoded text (invalid bytes as U+FFFD, marked ``"rawDecoded": "replace"``),
    redacted; one that cannot be decoded is dropped (``"rawDropped"``, counted in
    :attr:`dropped`): no record leaves redaction unscanned.
    """

    def __init__(self) -> None:
        self._placeholders: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self.replaced = 0
        #: Verbatim records dropped because they could not be decoded to be scanned.
        self.dropped = 0

    @property
    def secrets(self) -> int:
        """How many distinct secrets got a placeholder."""
        return len(self._placeholders)

    def placeholder(self, secret: str, kind: str) -> str:
        """The placeholder of ``secret`` (a new one, of ``kind``, on first sight)."""
        known = self._placeholders.get(secret)
        if known is None:
            number = self._counts[kind] = self._counts.get(kind, 0) + 1
            known = self._placeholders[secret] = f"[REDACTED:{kind}:{number}]"
        return known

    def redact_entries(self, entries: list[Entry], *, share_clean: bool = False) -> list[Entry]:
        """New entries (deep copies) with every secret replaced; ``entries`` are not changed.

        With ``share_clean``, when the session holds no secret long enough to be replaced
        unflagged (:data:`GLOBAL_REPLACE_MIN`), an entry with no finding and no ``foreign``
        object is returned as it is (the same object, not a copy): for read-only results
        such as an export (:func:`redact_parsed`), which then costs the scan and not a copy
        of every entry."""
        found: dict[tuple[int, str], list[Hit]] = {}
        raws: dict[int, tuple[str, object, Any]] = {}
        record_hits: list[FieldHits] = []
        for index, entry in enumerate(entries):
            record = _record(entry)
            if record is not None:
                raws[index] = record
            mapped_hits, hits = _entry_hits(entry, record)
            self._found(found, index, mapped_hits)
            record_hits.append(hits)
        # The verbatim records after every mapped field: a secret both show is numbered
        # in the order the mapped text shows it.
        for index, hits in enumerate(record_hits):
            self._found(found, index, hits)
        long_secrets = sorted((s for s in self._placeholders if len(s) >= GLOBAL_REPLACE_MIN), key=len, reverse=True)
        known = re.compile("|".join(map(re.escape, long_secrets))) if long_secrets else None
        flagged = {index for index, _ in found} if share_clean and known is None else None
        out = []
        for index, entry in enumerate(entries):
            if flagged is not None and index not in flagged and "foreign" not in entry:
                out.append(entry)
                continue
            copy = self._copy(entry, "", True, index, found, known)
            info = entry.get("foreign")
            if isinstance(info, dict):
                # Bookkeeping kept, any other value redacted as mapped text, the record below.
                other = {key: item if key in FOREIGN_META else self._copy(item, f"foreign.{key}", False, index, found,
                                                                        known)
                         for key, item in info.items()}
                copy["foreign"] = self._redact_raw(other, index, raws.get(index), found, known)
            out.append(copy)
        return out

    def _found(self, found: dict[tuple[int, str], list[Hit]], index: int, field_hits: FieldHits) -> None:
        for path, text, hits in field_hits:
            found[index, path] = hits
            for hit in hits:
                self.placeholder(text[hit.start:hit.end], hit.kind)

    def _redact_raw(self, info: dict[str, Any], index: int, raw: tuple[str, object, Any] | None,
                    found: dict[tuple[int, str], list[Hit]], known: re.Pattern[str] | None) -> dict[str, Any]:
        out = dict(info)
        if raw is None:
            if "rawBase64" in out:  # not base64: it cannot be scanned, so it does not leave
                del out["rawBase64"]
                out["rawDropped"] = "not valid base64: could not be scanned"
                self.dropped += 1
            return out
        text, how, value = raw
        root = f"foreign.{how}"
        if value is None:
            redacted = self._replace(text, found.get((index, root), []), known)
        else:
            copy = self._copy_raw(value, root, index, found, known)
            if copy == value:
                redacted = text
            else:
                body = text.strip()
                lead = text[:len(text) - len(text.lstrip())]
                redacted = lead + orjson.dumps(copy).decode("utf-8") + text[len(lead) + len(body):]
        if how == "rawBase64":
            del out["rawBase64"]
            out["raw"] = redacted
            out["rawDecoded"] = "replace"
        else:
            out["raw"] = redacted
        return out

    def _copy_raw(self, value: Any, path: str, index: int, found: dict[tuple[int, str], list[Hit]],
                  known: re.Pattern[str] | None) -> Any:
        if isinstance(value, str):
            return self._replace(value, found.get((index, path), []), known)
        if isinstance(value, dict):
            return {key: item if key in PROTOCOL_KEYS else self._copy_raw(item, f"{path}.{key}", index, found, known)
                    for key, item in value.items()}
        if isinstance(value, list):
            return [self._copy_raw(item, f"{path}[{i}]", index, found, known) for i, item in enumerate(value)]
        return value

    def _replace(self, text: str, hits: list[Hit], known: re.Pattern[str] | None) -> str:
        spans = list(hits)
        if known is not None:
            spans.extend(Hit(m.start(), m.end(), "") for m in known.finditer(text))
            spans = _merge(spans)
        if not spans:
            return text
        out: list[str] = []
        at = 0
        for hit in spans:
            secret = text[hit.start:hit.end]
            out.append(text[at:hit.start])
            out.append(self._placeholders.get(secret) or self.placeholder(secret, hit.kind or "secret"))
            at = hit.end
            self.replaced += 1
        out.append(text[at:])
        return "".join(out)

    def _copy(self, value: Any, path: str, structural: bool, index: int,
              found: dict[tuple[int, str], list[Hit]], known: re.Pattern[str] | None, skip: bool = False) -> Any:
        if isinstance(value, str):
            if skip:
                return value
            return self._replace(value, found.get((index, path), []), known)
        if isinstance(value, dict):
            image = value.get("type") == "image"
            # The entry's foreign object is redacted by redact_entries (_redact_raw), not here.
            return {key: item if not path and key == "foreign" and isinstance(item, dict) else
                    self._copy(item, _path(path, key),
                               structural and key in ("message", "content", "systemMessage", "replacement"),
                               index, found, known,
                               structural and (key in STRUCTURAL_KEYS or (image and key == "data")))
                    for key, item in value.items()}
        if isinstance(value, list):
            return [self._copy(item, f"{path}[{i}]", structural, index, found, known, skip)
                    for i, item in enumerate(value)]
        return value

    def redact_header(self, header: Mapping[str, Any], entries: list[Entry], *,
                      share_clean: bool = False) -> tuple[dict[str, Any], list[Entry]]:
        """``header`` and ``entries`` redacted in one pass (the header's text, ``cwd``, is
        scanned as an entry's is; its ``id``, ``type`` and ``timestamp`` are kept);
        ``share_clean`` as for :meth:`redact_entries`."""
        both = self.redact_entries([dict(header), *entries], share_clean=share_clean)
        return both[0], both[1:]

    def marked_header(self, header: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``header`` with the :data:`HEADER_MARKER` field added last."""
        marked = dict(header)
        marked[HEADER_MARKER] = {"tool": "sessiontree", "placeholders": self.secrets}
        return marked


def redact_text(text: str) -> str:
    """``text`` with its secrets replaced (placeholders numbered within ``text`` alone)."""
    return Redactor()._replace(text, scan_text(text), None)


def redact_parsed(parsed: ParsedSession) -> tuple[ParsedSession, Redactor]:
    """A redacted copy of a read session (header scanned and marked, entries redacted,
    verbatim records included) and its :class:`Redactor` (counts, :attr:`Redactor.dropped`).
    ``parsed`` is not changed; the copy is read-only: in a session without secrets its
    entries are ``parsed``'s own objects (:meth:`Redactor.redact_entries`, ``share_clean``)."""
    redactor = Redactor()
    header, entries = redactor.redact_header(parsed.header, parsed.entries, share_clean=True)
    header = redactor.marked_header(header)
    copy = ParsedSession(header=header, entries=entries, raw=[None] * len(entries),
                         header_raw=jsonio.dumps(header), source_version=4, path=parsed.path,
                         lines=list(parsed.lines))
    return copy, redactor
