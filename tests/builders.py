"""Builders of the records the tests write: headers, entries, messages and content blocks.

Every test module takes its records from here. Builders that look alike but
write different data (another default timestamp, ``api``/``usage`` fields or
not, text as a string or as a block) are kept apart under their own names, so
no test's data changed when the modules' private copies were folded here;
a module may import one under the short name it used before
(``from builders import user_ms as user``).

Shapes follow format 4 (docs/rules/format.md, ``seed:header``,
``seed:message-entry``, ``seed:messages``). Timestamps of entries are ISO
strings with milliseconds; timestamps inside messages are Unix milliseconds
(or the small integers 1, 2, 3 where only their order matters).
"""

from __future__ import annotations

import itertools
from typing import Any

from sessiontree.format import jsonio

#: The default creation time of a header, and the entry timestamp of most builders.
CREATED = "2026-02-01T09:00:00.000Z"
#: A realistic message timestamp (Unix ms, 2023-11-14): the default of the ``*_ms`` builders.
T_MS = 1700000000000

# -- headers ---------------------------------------------------------------------------------------


def header(session_id: str, cwd: str = "/w", created: str = CREATED, **extra: Any) -> dict[str, Any]:
    """A minimal format-4 header: ``cwd`` ``/w``, created :data:`CREATED`; ``extra`` fields last."""
    return {"type": "session", "version": 4, "id": session_id, "createdAt": created, "cwd": cwd, **extra}


def work_header(session_id: str, cwd: str = "/work/a", created: str = CREATED, **extra: Any) -> dict[str, Any]:
    """:func:`header` with ``cwd`` ``/work/a`` (the store suites' project directory)."""
    return header(session_id, cwd, created, **extra)


def search_header(session_id: str, cwd: str) -> dict[str, Any]:
    """A header created ``2026-01-01T09:00:00.000Z`` in ``cwd`` (the search corpus)."""
    return header(session_id, cwd, "2026-01-01T09:00:00.000Z")


def usage_header(session_id: str, created: str = "2026-01-01T00:00:00.000Z", cwd: str = "/w") -> dict[str, Any]:
    """A header created at midnight of 2026-01-01 (the usage suites; ``created`` comes before ``cwd``)."""
    return header(session_id, cwd, created)


# -- content blocks --------------------------------------------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_call(call_id: str, name: str = "bash", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``toolCall`` content block (``arguments`` default ``{}``)."""
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments or {}}


# -- messages: user --------------------------------------------------------------------------------


def user(content: Any, ts: int = 1) -> dict[str, Any]:
    """A user message with ``content`` as given (a string or blocks), timestamp ``ts`` (default 1)."""
    return {"role": "user", "content": content, "timestamp": ts}


def user_ms(content: Any, ts: int = T_MS) -> dict[str, Any]:
    """:func:`user` stamped :data:`T_MS` by default (the manager suites)."""
    return user(content, ts)


def user_blocks(text: str, ts: int = 1) -> dict[str, Any]:
    """A user message whose content is one text block."""
    return {"role": "user", "content": [text_block(text)], "timestamp": ts}


# -- messages: assistant ---------------------------------------------------------------------------


def assistant(content: list[Any], stop: str = "stop", ts: int = 2, provider: str = "anthropic",
              model: str = "m1") -> dict[str, Any]:
    """An assistant message with every field the agent writes: ``api`` ``x``, one token each way."""
    return {
        "role": "assistant",
        "content": content,
        "api": "x",
        "provider": provider,
        "model": model,
        "usage": {"input": 1, "output": 1},
        "stopReason": stop,
        "timestamp": ts,
    }


def bare_assistant(content: Any, stop: str = "stop") -> dict[str, Any]:
    """An assistant message without ``api`` and ``usage`` (provider ``p``, model ``m``, timestamp 2)."""
    return {
        "role": "assistant",
        "content": content,
        "provider": "p",
        "model": "m",
        "stopReason": stop,
        "timestamp": 2,
    }


def assistant_ms(text: str = "ok", *, stop: str = "stop", calls: list[tuple[str, str]] | None = None,
                 ts: int = T_MS + 1) -> dict[str, Any]:
    """An assistant turn of text (none when empty) then one tool call per ``(id, name)`` in ``calls``;
    ``api`` ``x``, provider ``anthropic``, model ``m1``, empty usage, stamped :data:`T_MS` + 1."""
    content: list[Any] = [text_block(text)] if text else []
    for call_id, name in calls or []:
        content.append(tool_call(call_id, name))
    return {"role": "assistant", "content": content, "api": "x", "provider": "anthropic", "model": "m1",
            "usage": {}, "stopReason": stop, "timestamp": ts}


def assistant_calls(text: str = "", *, stop: str = "stop", calls: tuple[str, ...] = (), ts: int = 2) -> dict[str, Any]:
    """An assistant turn of text (none when empty) then a ``bash`` call per id in ``calls``;
    ``api`` ``x``, provider ``p``, model ``m``, empty usage."""
    content: list[Any] = [text_block(text)] if text else []
    content += [tool_call(c) for c in calls]
    return {"role": "assistant", "content": content, "api": "x", "provider": "p", "model": "m",
            "usage": {}, "stopReason": stop, "timestamp": ts}


def assistant_reply(text: str = "ok") -> dict[str, Any]:
    """A one-text-block assistant reply without ``api`` (provider ``p``, model ``m``, empty usage)."""
    return {"role": "assistant", "content": [text_block(text)], "provider": "p",
            "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 2}


def assistant_turn(text: str, model: str | None = "m1", calls: tuple[str, ...] = ()) -> dict[str, Any]:
    """A text block then a ``bash`` call per id in ``calls``; ``stopReason`` ``toolUse`` when there
    are calls; provider ``p`` and ``model`` unless ``model`` is ``None``; no ``api``, no usage."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": [text_block(text), *(tool_call(c) for c in calls)],
                               "stopReason": "toolUse" if calls else "stop", "timestamp": 2}
    if model is not None:
        message.update(provider="p", model=model)
    return message


# -- messages: tool results ------------------------------------------------------------------------


def tool_result(call_id: str, content: Any = None, name: str = "bash", ts: int = 3) -> dict[str, Any]:
    """A successful tool result; ``content`` defaults to one text block ``ok``."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [text_block("ok")] if content is None else content,
        "isError": False,
        "timestamp": ts,
    }


def tool_result_content(content: Any, call_id: str = "c1", is_error: bool = False) -> dict[str, Any]:
    """A ``bash`` tool result with ``content`` as given, for call ``c1`` by default, timestamp 3."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "bash",
        "content": content,
        "isError": is_error,
        "timestamp": 3,
    }


def tool_result_ms(call_id: str, text: str = "out", name: str = "bash") -> dict[str, Any]:
    """A successful tool result of one text block, stamped :data:`T_MS` + 2."""
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name,
            "content": [text_block(text)], "isError": False, "timestamp": T_MS + 2}


def tool_result_text(call_id: str, text: str = "out") -> dict[str, Any]:
    """A successful ``bash`` tool result of one text block, timestamp 3."""
    return tool_result(call_id, [text_block(text)])


# -- entries ---------------------------------------------------------------------------------------


def entry(kind: str, entry_id: str, parent: str | None = None, ts: str = CREATED, **fields: Any) -> dict[str, Any]:
    """An entry of type ``kind`` with the base fields (docs/rules/format.md ``seed:entry-base``), then ``fields``."""
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": ts, **fields}


def message_entry(entry_id: str, message: dict[str, Any], parent: str | None = None,
                  ts: str = CREATED) -> dict[str, Any]:
    """A ``message`` entry holding ``message``."""
    return entry("message", entry_id, parent, ts, message=message)


def message_of(entry_id: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    """:func:`message_entry` with the parent before the message, at :data:`CREATED`."""
    return message_entry(entry_id, message, parent)


def chain(*entries: dict[str, Any]) -> list[dict[str, Any]]:
    """Link entries parent -> child in the given order (the first is a root); changes them in place."""
    for prev, cur in itertools.pairwise(entries):
        cur["parentId"] = prev["id"]
    return list(entries)


def custom(entry_id: str, parent: str | None = None) -> dict[str, Any]:
    """A ``custom`` entry (not in context) of type ``t`` with empty data: the cheapest valid entry."""
    return {"type": "custom", "id": entry_id, "parentId": parent, "timestamp": CREATED,
            "customType": "t", "data": {}}


def custom_with_data(entry_id: str, parent: str | None = None, **data: Any) -> dict[str, Any]:
    """A ``custom`` entry of type ``test`` whose ``data`` is the keyword arguments."""
    return {"type": "custom", "id": entry_id, "parentId": parent, "timestamp": CREATED,
            "customType": "test", "data": data}


def session_info(entry_id: str, parent: str | None, name: str) -> dict[str, Any]:
    """A ``session_info`` entry naming the session."""
    return {"type": "session_info", "id": entry_id, "parentId": parent, "timestamp": CREATED,
            "name": name}


def session_summary(entry_id: str, parent: str | None, summary: str, through: str) -> dict[str, Any]:
    """A ``session_summary`` entry summarizing the session through entry ``through``."""
    return {"type": "session_summary", "id": entry_id, "parentId": parent,
            "timestamp": CREATED, "summary": summary, "summarizedThroughId": through}


def role_message(entry_id: str, parent: str | None, role: str, content: Any, stamp: int | None = None,
                 **fields: Any) -> dict[str, Any]:
    """A message entry of ``role`` (no message timestamp unless ``stamp``), entry time :data:`CREATED`."""
    msg: dict[str, Any] = {"role": role, "content": content, **fields}
    if stamp is not None:
        msg["timestamp"] = stamp
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": CREATED, "message": msg}


def user_entry(entry_id: str, parent: str | None, text: str) -> dict[str, Any]:
    """A user message entry at :data:`CREATED` whose message is stamped the same instant (Unix ms)."""
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": CREATED,
            "message": {"role": "user", "content": text, "timestamp": 1769936400000}}


def user_block_entry(entry_id: str, parent: str | None, text: str) -> dict[str, Any]:
    """A user message entry (one text block, message timestamp 1) at ``2026-01-01T10:00:00.000Z``."""
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T10:00:00.000Z",
            "message": {"role": "user", "content": [text_block(text)], "timestamp": 1}}


def search_message(entry_id: str, parent: str | None, role: str, content: Any, minute: int = 0,
                   **extra: Any) -> dict[str, Any]:
    """A message entry at ``2026-01-01T10:0<minute>:00.000Z``, its message stamped the same minute;
    an assistant gets ``api``/``provider``/``model``/``usage``/``stopReason`` first."""
    message = {"role": role, "content": content, "timestamp": 1_767_261_600_000 + minute * 60_000, **extra}
    if role == "assistant":
        message = {"api": "a", "provider": "p", "model": "m", "usage": {}, "stopReason": "stop", **message}
    return {"type": "message", "id": entry_id, "parentId": parent,
            "timestamp": f"2026-01-01T10:0{minute}:00.000Z", "message": message}


# -- entries with seconds: a short session on 2026-01-01 -------------------------------------------


def at_second(second: int) -> str:
    """``2026-01-01T00:00:SS.000Z``."""
    return f"2026-01-01T00:00:{second:02d}.000Z"


def user_at(entry_id: str, parent: str | None, text: str, second: int) -> dict[str, Any]:
    """A user message entry at :func:`at_second`, its message stamped ``second``."""
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": at_second(second),
            "message": {"role": "user", "content": text, "timestamp": second}}


def assistant_at(entry_id: str, parent: str | None, text: str, second: int, *,
                 calls: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """An assistant message entry at :func:`at_second`: a text block, then a ``bash`` call
    (``{"command": "ls"}``) per id in ``calls``; ``stopReason`` ``toolUse`` when there are calls."""
    content: list[dict[str, Any]] = [text_block(text)]
    content += [tool_call(c, arguments={"command": "ls"}) for c in calls]
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": at_second(second),
            "message": {"role": "assistant", "content": content, "provider": "p", "model": "m",
                        "stopReason": "toolUse" if calls else "stop", "timestamp": second}}


def tool_result_at(entry_id: str, parent: str, call: str, text: str, second: int) -> dict[str, Any]:
    """A ``bash`` tool result entry at :func:`at_second`."""
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": at_second(second),
            "message": {"role": "toolResult", "toolCallId": call, "toolName": "bash",
                        "content": [text_block(text)], "isError": False, "timestamp": second}}


# -- usage: assistant entries that bill tokens ----------------------------------------------------


def usage(inp: int = 0, out: int = 0, cr: int = 0, cw: int = 0, cost: float | None = None) -> dict[str, Any]:
    """A ``Usage`` object (``totalTokens`` 0); with ``cost``, a cost object whose only non-zero part is ``total``."""
    u: dict[str, Any] = {"input": inp, "output": out, "cacheRead": cr, "cacheWrite": cw, "totalTokens": 0}
    if cost is not None:
        u["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}
    return u


def billed_assistant(entry_id: str, parent: str | None, ts: str, usage: dict[str, Any], model: str = "m-known",
                     provider: str = "p") -> dict[str, Any]:
    """An assistant entry (no content, ``api`` ``x``) carrying ``usage``."""
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts,
            "message": {"role": "assistant", "content": [], "api": "x", "provider": provider, "model": model,
                        "usage": usage, "stopReason": "stop", "timestamp": 1}}


def billed_assistant_cost(entry_id: str, parent: str | None, ts: str, inp: int, cost: float | None,
                          model: str = "m", provider: str = "p") -> dict[str, Any]:
    """An assistant entry (``api`` ``a``) billing ``inp`` input and one output token; with ``cost``,
    a cost object of ``total`` alone."""
    u: dict[str, Any] = {"input": inp, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
    if cost is not None:
        u["cost"] = {"total": cost}
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts,
            "message": {"role": "assistant", "content": [], "api": "a", "provider": provider, "model": model,
                        "usage": u, "stopReason": "stop", "timestamp": 1}}


def billed_assistant_tokens(entry_id: str, parent: str | None, ts: str, tokens: int) -> dict[str, Any]:
    """An assistant entry billing ``tokens`` input tokens and one output token at ``tokens / 1000``."""
    u = {"input": tokens, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": tokens + 1,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": tokens / 1000}}
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts,
            "message": {"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                        "usage": u, "stopReason": "stop", "timestamp": 1}}


def billed_assistant_model(entry_id: str, parent: str | None, ts: str, tokens: int, cost: float | None,
                           model: str | None) -> dict[str, Any]:
    """An assistant entry (``api`` ``x``, provider ``p``) billing ``tokens`` input tokens and one
    output token (none when ``tokens`` is 0), no ``totalTokens``; ``model`` left out when ``None``;
    with ``cost``, a cost object of ``total`` alone."""
    u: dict[str, Any] = {"input": tokens, "output": 1 if tokens else 0, "cacheRead": 0, "cacheWrite": 0}
    if cost is not None:
        u["cost"] = {"total": cost}
    message: dict[str, Any] = {"role": "assistant", "content": [], "api": "x", "provider": "p", "usage": u,
                               "stopReason": "stop", "timestamp": 1}
    if model is not None:
        message["model"] = model
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts, "message": message}


# -- bytes -----------------------------------------------------------------------------------------


def jsonl_line(record: dict[str, Any]) -> bytes:
    """One JSONL line of ``record`` as sessiontree writes it (JavaScript's bytes, then ``\\n``)."""
    return jsonio.dumps(record) + b"\n"
