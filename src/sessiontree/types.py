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
    type: Literal["text"]
    text: str


class ImageContent(TypedDict):
    type: Literal["image"]
    data: str  # base64
    mimeType: str


class ThinkingContent(TypedDict):
    type: Literal["thinking"]
    thinking: str
    thinkingSignature: NotRequired[str]
    redacted: NotRequired[bool]


class ToolCall(TypedDict):
    type: Literal["toolCall"]
    id: str
    name: str
    arguments: dict[str, Any]


ContentBlock = Union[TextContent, ImageContent, ThinkingContent, ToolCall]


class Cost(TypedDict):
    input: float
    output: float
    cacheRead: float
    cacheWrite: float
    total: float


class Usage(TypedDict):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    totalTokens: int
    cost: Cost


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str | list[TextContent]
    sections: NotRequired[dict[str, str | None]]
    toolsAdded: NotRequired[list[dict[str, Any]]]
    toolsRemoved: NotRequired[list[dict[str, Any]]]
    timestamp: int  # Unix ms


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[TextContent | ImageContent]
    timestamp: int  # Unix ms


class AssistantMessage(TypedDict):
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
    role: Literal["custom"]
    customType: str
    content: str | list[TextContent | ImageContent]
    display: bool
    details: NotRequired[Any]
    timestamp: int


class BranchSummaryMessage(TypedDict):
    role: Literal["branchSummary"]
    summary: str
    fromId: str
    timestamp: int


AgentMessage = Union[
    SystemMessage, UserMessage, AssistantMessage, ToolResultMessage,
    BashExecutionMessage, CustomMessage, BranchSummaryMessage,
]


class WorkflowLink(TypedDict):
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
    type: str
    id: str  # 8 hex characters when generated here
    parentId: str | None
    timestamp: str  # ISO-8601 UTC with milliseconds


class SessionMessageEntry(SessionEntryBase):
    message: AgentMessage


class ModelChangeEntry(SessionEntryBase):
    provider: str
    modelId: str


class ThinkingLevelChangeEntry(SessionEntryBase):
    thinkingLevel: str


class ContextWindowChangeEntry(SessionEntryBase):
    contextWindow: int  # tokens


class CompactionEntry(SessionEntryBase):
    summary: str
    firstKeptEntryId: NotRequired[str | None]
    tokensBefore: int
    details: NotRequired[dict[str, Any]]
    fromHook: NotRequired[bool]
    systemMessage: NotRequired[SystemMessage]


class ContextCompactionEntry(SessionEntryBase):
    promptVersion: int
    deletedTargets: list[dict[str, Any]]
    protectedEntryIds: list[str]
    stats: dict[str, Any]


class ContextEditEntry(SessionEntryBase):
    targetId: str
    replacement: dict[str, Any] | None  # None or {"content": str | blocks}


class BranchSummaryEntry(SessionEntryBase):
    fromId: str
    summary: str
    details: NotRequired[Any]
    usage: NotRequired[Any]
    fromHook: NotRequired[bool]


class CustomEntry(SessionEntryBase):
    customType: str
    data: NotRequired[Any]


class CustomMessageEntry(SessionEntryBase):
    customType: str
    content: str | list[TextContent | ImageContent]
    display: bool
    details: NotRequired[Any]


class LabelEntry(SessionEntryBase):
    targetId: str
    label: NotRequired[str]


class SessionInfoEntry(SessionEntryBase):
    name: str


class SessionSummaryEntry(SessionEntryBase):
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
