"""Hand-built branching sessions for the branch-diff tests (docs/diff.md), their expected
diffs worked out by hand in the tests that use them."""

from __future__ import annotations

from typing import Any

from builders import entry, message_entry, text_block, tool_call, usage


def at(minute: int, second: int) -> str:
    """An entry timestamp on 2026-03-02 at 09:MM:SS UTC."""
    return f"2026-03-02T09:{minute:02d}:{second:02d}.000Z"


def user_at(entry_id: str, parent: str | None, text: str, ts: str) -> dict[str, Any]:
    """A user message entry of ``text`` (message timestamp 1)."""
    return message_entry(entry_id, {"role": "user", "content": text, "timestamp": 1}, parent, ts)


def assistant_at(entry_id: str, parent: str | None, ts: str, content: list[Any], *, model: str = "m1",
                 bill: tuple[int, int, float] | None = None) -> dict[str, Any]:
    """An assistant entry; ``toolUse`` when ``content`` holds a call; ``bill`` = (input, output, cost)."""
    stop = "toolUse" if any(b.get("type") == "toolCall" for b in content) else "stop"
    message = {"role": "assistant", "content": content, "api": "x", "provider": "p", "model": model,
               "usage": usage(*bill[:2], cost=bill[2]) if bill else {}, "stopReason": stop, "timestamp": 2}
    return message_entry(entry_id, message, parent, ts)


def result_at(entry_id: str, parent: str, call_id: str, name: str, text: str, ts: str) -> dict[str, Any]:
    """A successful tool result entry."""
    return message_entry(entry_id, {"role": "toolResult", "toolCallId": call_id, "toolName": name,
                                    "content": [text_block(text)], "isError": False, "timestamp": 3}, parent, ts)


def two_approaches() -> list[dict[str, Any]]:
    """A session forked after a read; A edits and finishes, B switches model and thinking
    level and writes, then stops with its two calls unanswered (the active leaf)::

        u1 user "fix the bug"
        a1 assistant "look" read(src/x.py)        bills 100 in, 10 out, $0.001
        r1 toolResult read
        ├── aA1 assistant edit(src/x.py)          bills 200 in, 20 out, $0.002
        │   rA1 toolResult edit
        │   aA2 assistant "done A"                bills 300 in, 30 out, $0.003
        └── mB  model_change p/m2
            tB  thinking_level_change high
            aB1 assistant write(src/y.py) read(src/x.py), model m2; bills 400 in, 40 out, $0.004
    """
    return [
        user_at("u1", None, "fix the bug", at(0, 0)),
        assistant_at("a1", "u1", at(0, 1), [text_block("look"), tool_call("c1", "read", {"path": "src/x.py"})],
                     bill=(100, 10, 0.001)),
        result_at("r1", "a1", "c1", "read", "contents", at(0, 2)),
        assistant_at("aA1", "r1", at(1, 0), [tool_call("cA", "edit", {"path": "src/x.py"})], bill=(200, 20, 0.002)),
        result_at("rA1", "aA1", "cA", "edit", "ok", at(1, 1)),
        assistant_at("aA2", "rA1", at(1, 2), [text_block("done A")], bill=(300, 30, 0.003)),
        entry("model_change", "mB", "r1", at(2, 0), provider="p", modelId="m2"),
        entry("thinking_level_change", "tB", "mB", at(2, 1), thinkingLevel="high"),
        assistant_at("aB1", "tB", at(2, 2), [tool_call("cB1", "write", {"path": "src/y.py"}),
                                             tool_call("cB2", "read", {"file_path": "src/x.py"})],
                     model="m2", bill=(400, 40, 0.004)),
    ]


def fork_of_two_approaches() -> list[dict[str, Any]]:
    """What a fork copied under new ids looks like: ``u1, a1, r1`` of :func:`two_approaches`
    with ids ``f1, f2, f3`` (same content and timestamps), then a new user prompt ``f4``."""
    source = two_approaches()[:3]
    out = []
    parent = None
    for new_id, old in zip(("f1", "f2", "f3"), source, strict=True):
        out.append(dict(old, id=new_id, parentId=parent))
        parent = new_id
    out.append(user_at("f4", "f3", "try it another way", at(5, 0)))
    return out
