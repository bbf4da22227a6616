"""Typed shapes of the header, every entry kind and every message role.

Entries stay plain ``dict``s (SPEC §2): these ``TypedDict``s describe them
for type checkers and readers without restricting them, so unknown fields
that extensions add survive a read/write round trip. Keys are the file's own
camelCase names. Shapes follow the seed's "Message Types" and "Entry Types"
sections and REFERENCE group A.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, Union

__all__ = [
    "TextContent", "ImageContent", "ThinkingContent", "ToolCall", "ContentBlock",
    "Cost", "Usage", "SystemMessage", "UserMessage", "AssistantMessage",
    "ToolResultMessage", "BashExecutionMessage", "CustomMessage",
    "BranchSummaryMessage", "AgentMessage", "WorkflowLink", "SessionHeader",
    "SessionEntryBase", "SessionMessageEntry", "ModelChangeEntry",
    "ThinkingLevelChangeEntry", "ContextWindowChangeEntry", "CompactionEntry",
    "ContextCompactionEntry", "ContextEditEntry", "BranchSummaryEntry",
    "CustomEntry", "CustomMessageEntry", "LabelEntry", "SessionInfoEntry",
    "SessionSummaryEntry", "SessionEntry", "ENTRY_TYPES", "MESSAGE_ROLES",
]


class TextContent(TypedDict):
    """A text block (seed "Content Blocks")."""

    type: Literal["text"]
    text: str


class ImageContent(TypedDict):
    """An image block: base64 ``data`` and its ``mimeType`` (seed "Content Blocks")."""

    type: Literal["image"]
    data: str  # base64
    mimeType: str


class ThinkingContent(TypedDict):
    """A thinking block; ``thinkingSignature``/``redacted`` as providers send them (REFERENCE A.22)."""

    type: Literal["thinking"]
    thinking: str
    thinkingSignature: NotRequired[str]
    redacted: NotRequired[bool]


class ToolCall(TypedDict):
    """A tool call inside an assistant message; ``arguments`` is a JSON object (seed "Content Blocks")."""

    type: Literal["toolCall"]
    id: str
    name: str
    arguments: dict[str, Any]


ContentBlock = Union[TextContent, ImageContent, ThinkingContent, ToolCall]


class Cost(TypedDict):
    """Cost of a call in the provider's currency units (seed "Base Message Types", ``Usage.cost``)."""

    input: float
    output: float
    cacheRead: float
    cacheWrite: float
    total: float


class Usage(TypedDict):
    """Token counts and cost of one model call (seed "Base Message Types")."""

    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    totalTokens: int
    cost: Cost


class SystemMessage(TypedDict):
    """Prompt and tool changes, replayed in order: ``sections`` patch by name (``None`` deletes), tools added/removed (seed "Base Message Types", REFERENCE §3.6)."""

    role: Literal["system"]
    content: str | list[TextContent]
    sections: NotRequired[dict[str, str | None]]
    toolsAdded: NotRequired[list[dict[str, Any]]]
    toolsRemoved: NotRequired[list[dict[str, Any]]]
    timestamp: int  # Unix ms


class UserMessage(TypedDict):
    """A user turn; ``content`` is a string or text/image blocks; ``timestamp`` in Unix ms (seed)."""

    role: Literal["user"]
    content: str | list[TextContent | ImageContent]
    timestamp: int  # Unix ms


class AssistantMessage(TypedDict):
    """A model turn with its provider, model, usage and ``stopReason`` (seed; ``"pending"`` never stored)."""

    role: Literal["assistant"]
    content: list[TextContent | ThinkingContent | ToolCall]
    api: str
    provider: str
    model: str
    usage: Usage
    stopReason: Literal["stop", "length", "toolUse", "error", "aborted"]
    errorMessage: NotRequired[str]
    timestamp: int


class ToolResultMessage(TypedDict):
    """The result of one tool call, matched by ``toolCallId`` (seed; ``nestedCalls`` bounded on write, REFERENCE §3.10)."""

    role: Literal["toolResult"]
    toolCallId: str
    toolName: str
    content: list[TextContent | ImageContent]
    details: NotRequired[Any]
    structuredContent: NotRequired[Any]
    usage: NotRequired[Usage]
    nestedCalls: NotRequired[dict[str, Any]]  # {"calls": [...], "complete": bool}
    isError: bool
    timestamp: int


class BashExecutionMessage(TypedDict):
    """A shell command run by the user; ``excludeFromContext`` for ``!!`` commands (seed "Extended Message Types")."""

    role: Literal["bashExecution"]
    command: str
    output: str
    exitCode: int | None
    cancelled: bool
    truncated: bool
    fullOutputPath: NotRequired[str]
    excludeFromContext: NotRequired[bool]
    timestamp: int


class CustomMessage(TypedDict):
    """An extension message in context; ``display`` only affects the UI (seed "Extended Message Types")."""

    role: Literal["custom"]
    customType: str
    content: str | list[TextContent | ImageContent]
    display: bool
    details: NotRequired[Any]
    timestamp: int


class BranchSummaryMessage(TypedDict):
    """Summary of an abandoned branch as a message (seed "Extended Message Types")."""

    role: Literal["branchSummary"]
    summary: str
    fromId: str
    timestamp: int


AgentMessage = Union[
    SystemMessage, UserMessage, AssistantMessage, ToolResultMessage,
    BashExecutionMessage, CustomMessage, BranchSummaryMessage,
]


class WorkflowLink(TypedDict):
    """Workflow ownership of an internal session; all three fields non-empty strings (seed "SessionHeader")."""

    runId: str
    stageId: str
    stageName: str


class SessionHeader(TypedDict):
    """First line of a file; metadata, not a tree entry (seed "SessionHeader")."""

    type: Literal["session"]
    version: int
    id: str
    createdAt: str  # ISO-8601 UTC with milliseconds
    cwd: str
    parentSessionId: NotRequired[str]
    internal: NotRequired[bool]
    workflow: NotRequired[WorkflowLink]


class SessionEntryBase(TypedDict):
    """Fields every entry has: 8-hex ``id`` (any non-empty string when read), ``parentId`` (``None`` for a root), ISO ``timestamp`` (seed "Entry Base")."""

    type: str
    id: str  # 8 hex characters when generated here
    parentId: str | None
    timestamp: str  # ISO-8601 UTC with milliseconds


class SessionMessageEntry(SessionEntryBase):
    """A conversation message (seed "SessionMessageEntry")."""

    message: AgentMessage


class ModelChangeEntry(SessionEntryBase):
    """The user switched models (seed "ModelChangeEntry")."""

    provider: str
    modelId: str


class ThinkingLevelChangeEntry(SessionEntryBase):
    """The thinking level changed; stored as given (seed "ThinkingLevelChangeEntry")."""

    thinkingLevel: str


class ContextWindowChangeEntry(SessionEntryBase):
    """The selected context window, a positive number of tokens (SPEC §2, REFERENCE §3.8)."""

    contextWindow: int  # tokens


class CompactionEntry(SessionEntryBase):
    """A compaction; active only with ``details.strategy == "verbatim-lines"``; ``firstKeptEntryId`` string, ``None`` or absent (seed "CompactionEntry")."""

    summary: str
    firstKeptEntryId: NotRequired[str | None]
    tokensBefore: int
    details: NotRequired[dict[str, Any]]
    fromHook: NotRequired[bool]
    systemMessage: NotRequired[SystemMessage]


class ContextCompactionEntry(SessionEntryBase):
    """Retired logical-deletion record: kept and round-tripped, never applied (seed "ContextCompactionEntry")."""

    promptVersion: int
    deletedTargets: list[dict[str, Any]]
    protectedEntryIds: list[str]
    stats: dict[str, Any]


class ContextEditEntry(SessionEntryBase):
    """Branch-local edit of one earlier entry's model content; ``None`` omits it (seed "ContextEditEntry")."""

    targetId: str
    replacement: dict[str, Any] | None  # None or {"content": str | blocks}


class BranchSummaryEntry(SessionEntryBase):
    """Summary of the branch left behind; ``fromId`` is the leaf that was left or ``"root"`` (seed, D-4)."""

    fromId: str
    summary: str
    details: NotRequired[Any]
    usage: NotRequired[Any]
    fromHook: NotRequired[bool]


class CustomEntry(SessionEntryBase):
    """Extension state; never in model context (seed "CustomEntry")."""

    customType: str
    data: NotRequired[Any]


class CustomMessageEntry(SessionEntryBase):
    """Extension message that is in model context (seed "CustomMessageEntry")."""

    customType: str
    content: str | list[TextContent | ImageContent]
    display: bool
    details: NotRequired[Any]


class LabelEntry(SessionEntryBase):
    """Sets (non-empty ``label``) or clears (absent or ``""``) a bookmark on ``targetId`` (seed "LabelEntry")."""

    targetId: str
    label: NotRequired[str]


class SessionInfoEntry(SessionEntryBase):
    """Display name; an empty ``name`` clears it (seed "SessionInfoEntry")."""

    name: str


class SessionSummaryEntry(SessionEntryBase):
    """Generated one-line description, fresh only while ``summarizedThroughId`` is the newest user/assistant message (seed "SessionSummaryEntry")."""

    summary: str
    summarizedThroughId: str
    usage: NotRequired[Any]


SessionEntry = Union[
    SessionMessageEntry, ModelChangeEntry, ThinkingLevelChangeEntry,
    ContextWindowChangeEntry, CompactionEntry, ContextCompactionEntry,
    ContextEditEntry, BranchSummaryEntry, CustomEntry, CustomMessageEntry,
    LabelEntry, SessionInfoEntry, SessionSummaryEntry,
]

#: Every entry ``type`` the seed defines; others are kept verbatim and inert (D-10).
ENTRY_TYPES = frozenset({
    "message", "model_change", "thinking_level_change", "context_window_change",
    "compaction", "context_compaction", "context_edit", "branch_summary",
    "custom", "custom_message", "label", "session_info", "session_summary",
})

#: Every message role of the seed's AgentMessage union (plus legacy ``compactionSummary``).
MESSAGE_ROLES = frozenset({
    "system", "user", "assistant", "toolResult", "bashExecution", "custom",
    "branchSummary", "compactionSummary",
})
