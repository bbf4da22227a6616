"""The listing corpus of the store suites: seven sessions whose listing rows the tests
work out by hand (docs/rules/listing.md L.8-L.19, K and O)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from builders import CREATED, session_info, session_summary
from builders import role_message as message
from builders import work_header as header

WORKFLOW = {"runId": "run-1", "stageId": "stage-build", "stageName": "build"}


def ms(*parts: int) -> int:
    """Unix milliseconds of a UTC wall-clock time."""
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)


def build_listing_fixture(store: Any) -> None:
    """Write seven sessions covering docs/rules/listing.md L.8-L.19, K and O (the tests work out the values)."""
    # A: named (trimmed), first user message with text wins, tool results count but do not date.
    store.create(header("A", cwd="/work/a"), [
        message("a0", None, "user", [{"type": "image", "data": "QQ==", "mimeType": "image/png"}],
                ms(2026, 2, 1, 9, 0, 0)),
        message("a1", "a0", "user", "Fix the build", ms(2026, 2, 1, 9, 0, 1)),
        message("a2", "a1", "assistant",
                [{"type": "text", "text": "Done."}, {"type": "thinking", "thinking": "hmm"},
                 {"type": "text", "text": "Bye."}], ms(2026, 2, 1, 9, 0, 5)),
        message("a3", "a2", "toolResult", [{"type": "text", "text": "ok"}], ms(2026, 2, 1, 9, 30, 0),
                toolCallId="c1", toolName="bash", isError=False),
    ])
    store.append("A", [session_info("a4", "a3", "  Build fix  ")])
    # B: named then cleared; a null-content user message still dates the session (L.16, L.19).
    store.create(header("B", cwd="/work/b"), [message("b1", None, "user", "hello", ms(2026, 2, 1, 9, 0, 10))])
    store.append("B", [session_info("b2", "b1", "Old")])
    store.append("B", [session_info("b3", "b2", ""), message("b4", "b3", "user", None, ms(2026, 2, 1, 9, 0, 20))])
    # C: never named, no messages: modified falls back to createdAt.
    store.create(header("C", cwd="/work/a", created="2026-02-01T08:00:00.000Z"), [
        {"type": "model_change", "id": "c1", "parentId": None, "timestamp": CREATED,
         "provider": "openai", "modelId": "gpt-4o"}])
    # D: fresh summary; a later tool result does not make it stale (K.3).
    store.create(header("D", cwd="/work/a"), [
        message("d1", None, "user", "Add retries", ms(2026, 2, 1, 9, 1, 0)),
        message("d2", "d1", "assistant", [{"type": "text", "text": "Added."}], ms(2026, 2, 1, 9, 2, 0)),
    ])
    store.append("D", [session_summary("d3", "d2", "Retries added", "d2")])
    store.append("D", [message("d4", "d3", "toolResult", [{"type": "text", "text": "x"}], ms(2026, 2, 1, 9, 2, 30),
                               toolCallId="c", toolName="t", isError=False)])
    # E: the same, then a newer user message makes the summary stale.
    store.create(header("E", cwd="/work/a"), [
        message("e1", None, "user", "Add retries", ms(2026, 2, 1, 9, 1, 0)),
        message("e2", "e1", "assistant", [{"type": "text", "text": "Added."}], ms(2026, 2, 1, 9, 2, 0)),
        session_summary("e3", "e2", "Retries added", "e2"),
    ])
    store.append("E", [message("e4", "e3", "user", "One more thing", ms(2026, 2, 1, 9, 4, 0))])
    # F: a classified workflow session (O.1): hidden unless include_internal.
    store.create(header("F", cwd="/work/a", internal=True, workflow=WORKFLOW),
                 [message("f1", None, "user", "stage work", ms(2026, 2, 1, 9, 5, 0))])
    # G: a malformed marker (internal without workflow) stays visible (O.6).
    store.create(header("G", cwd="/work/a", internal=True),
                 [message("g1", None, "user", "visible", ms(2026, 2, 1, 9, 6, 0))])
