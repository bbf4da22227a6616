"""Share-safe text in MCP answers: what the tools' ``redact`` argument does (docs/mcp.md, "Redaction").

A :class:`Scrubber` serves one tool answer. It wraps one
:class:`sessiontree.core.secrets.Redactor` (docs/secrets.md), so a secret gets
the same ``[REDACTED:kind:N]`` placeholder everywhere in that answer; N counts
within the answer, not across pages or calls. Only session text goes through
it: entries (their structural fields, ids and times, are kept, as in a
redacted export), headers and every ``cwd`` shown (``info``, list rows, search
hits), context messages, names, labels, summaries and search snippets. Ids, cursors and counts are never scanned (a cursor is base64 and
would look like a secret).

``detect_secrets`` is imported when the first scrubber is made, not when the
server starts: most calls never ask for redaction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: A run of non-blank characters touching a snippet's clipped edge (after or before the ``…``).
_LEAD = re.compile(r"\A…(\S+)")
_TAIL = re.compile(r"(\S+)…\Z")
#: What a partial word cut off at a clipped snippet edge becomes.
EDGE_STANDIN = "…"


class Scrubber:
    """Redacts the session text of one answer (docs/mcp.md, "Redaction")."""

    def __init__(self) -> None:
        from sessiontree.core.secrets import Redactor

        self._redactor = Redactor()

    @property
    def secrets(self) -> int:
        """Distinct secrets replaced so far in this answer."""
        return self._redactor.secrets

    def entry(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """A redacted copy of a stored entry (or header): structural fields kept, text scanned."""
        return self._redactor.redact_entries([dict(entry)])[0]

    def message(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """A redacted copy of a context message (scanned as the message of an entry)."""
        return self.entry({"type": "message", "message": dict(message)})["message"]  # type: ignore[no-any-return]

    def text(self, text: Any) -> Any:
        """``text`` redacted when it is a string (``None`` and other values as they are)."""
        if not isinstance(text, str) or not text:
            return text
        return self.entry({"text": text})["text"]

    def fields(self, row: dict[str, Any], *keys: str) -> dict[str, Any]:
        """``row`` with the string values of ``keys`` redacted (in place; returned for chaining)."""
        for key in keys:
            if key in row:
                row[key] = self.text(row[key])
        return row

    def snippet(self, hit: dict[str, Any], entry: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A search hit with its title, name, ``cwd`` and snippet redacted.

        ``entry``, the hit's whole stored entry when the caller could read it,
        is scanned first: a snippet shows its text with line breaks turned
        into spaces and cut to a window, which can hide a secret's shape (a
        ``password: ...`` assignment needs its line end), while the secrets
        found in the whole entry are then replaced wherever they occur. A snippet is a window cut at character positions, so a secret may be
        cut in two at a clipped edge (marked ``…``), and its half is no longer
        recognisable: the partial word at each clipped edge is dropped. The
        highlights move with the text; when a secret inside the snippet was
        replaced, offsets after it would be wrong, so the highlights are left
        out (an empty list).
        """
        if entry is not None:
            self.entry(entry)
        self.fields(hit, "title", "sessionName", "cwd")
        text = hit.get("snippet")
        if not isinstance(text, str):
            return hit
        marks = [list(span) for span in hit.get("highlights") or []]
        lead = _LEAD.match(text)
        if lead:
            cut = lead.end(1) - 1  # characters removed after the leading "…"
            text = EDGE_STANDIN + text[lead.end(1):]
            marks = [[max(s - cut, 1), e - cut] for s, e in marks if e - cut > 1]
        tail = _TAIL.search(text)
        if tail and tail.start(1) > len(EDGE_STANDIN):
            end = tail.start(1)
            text = text[:end] + EDGE_STANDIN
            marks = [[s, min(e, end)] for s, e in marks if s < end]
        redacted = self.text(text)
        hit["snippet"] = redacted
        hit["highlights"] = marks if redacted == text else []
        return hit
