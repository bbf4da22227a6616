"""The tool calls of a message as ``diff`` counts them (docs/diff.md, "Columns").

Kept apart from :mod:`sessiontree.core.diff` (which re-exports both names) because the
SQLite store's write path keeps these pairs per entry as derived data (its
``tool_calls`` table) and must not import the comparison's modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["FILE_TOOLS", "tool_calls"]

#: Tools whose ``path`` argument names a file the call touched, as the agent records
#: them (lower-cased tool name). Other tools' arguments are not guessed at.
FILE_TOOLS: Final = frozenset({"read", "edit", "write"})
#: Argument names read as the file path of a file tool, first found wins.
_PATH_ARGS: Final = ("path", "file_path", "filePath")


def _file_path(arguments: Any) -> str | None:
    if arguments.__class__ is not dict and not isinstance(arguments, Mapping):
        return None
    for name in _PATH_ARGS:
        value = arguments.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def tool_calls(message: Any) -> list[tuple[str, str | None]]:
    """``(tool name, file path or None)`` of each ``toolCall`` block of an assistant
    ``message``, in order (empty for anything else): the rule of
    :class:`sessiontree.core.diff.ColumnStats` (a name that is not a string is ``"?"``;
    the path only for :data:`FILE_TOOLS`, from the first of ``path``, ``file_path``,
    ``filePath`` that is a non-empty string, as recorded)."""
    if not (message.__class__ is dict or isinstance(message, Mapping)) or message.get("role") != "assistant":
        return []
    content = message.get("content")
    calls: list[tuple[str, str | None]] = []
    for block in content if isinstance(content, list) else ():
        if (block.__class__ is not dict and not isinstance(block, Mapping)) or block.get("type") != "toolCall":
            continue
        name = block.get("name")
        name = name if isinstance(name, str) else "?"
        calls.append((name, _file_path(block.get("arguments")) if name.lower() in FILE_TOOLS else None))
    return calls
