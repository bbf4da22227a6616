"""Typed shapes of the header, every entry kind and every message role.

Entries stay plain ``dict``s (docs/rules/format.md spec:data-model): these ``TypedDict``s describe them
for type checkers and readers without restricting them, so unknown fields
that extensions add survive a read/write round trip. Keys are the file's own
camelCase names. Shapes follow the format's message and entry types
(docs/rules/format.md).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "ENTRY_TYPES",
    "MAPPED_ENTRY_TYPES",
    "MESSAGE_ROLES",
    "AgentMessage",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryEntry",
    "BranchSummaryMessage",
    "CompactionEntry",
    "ContentBlock",
    "ContextCompactionEntry",
    "ContextEditEntry",
    "ContextWindowChangeEntry",
    "Cost",
    "CustomEntry",
    "CustomMessage",
    "CustomMessageEntry",
    "Entry",
    "ImageContent",
    "LabelEntry",
    "ModelChangeEntry",
    "SessionEntry",
    "SessionEntryBase",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionMessageEntry",
    "SessionSummaryEntry",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevelChangeEntry",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "WorkflowLink",
]


class TextContent(TypedDict):
    """A text block (docs/rules/format.md seed:content-blocks)."""

    type: Literal["text"]
    text: str


class ImageContent(TypedDict):
    """An image block: base64 ``data`` and its ``mimeType`` (docs/rules/format.md seed:content-blocks)."""

    type: Literal["image"]
    data: str  # base64
    mimeType: str


class ThinkingContent(TypedDict):
    """A thinking block; ``thinkingSignature``/``redacted`` as providers send them
    (docs/rules/format.md A.22)."""

    type: Literal["thinking"]
    thinking: str
    thinkingSignature: NotRequired[str]
    redacted: NotRequired[bool]


class ToolCall(TypedDict):
    """A tool call inside an assistant message; ``arguments`` is a JSON object
    (docs/rules/format.md seed:content-blocks)."""

    type: Literal["toolCall"]
    id: str
    name: str
    arguments: dict[str, Any]


ContentBlock = TextContent | ImageContent | ThinkingContent | ToolCall


class Cost(TypedDict):
    """Cost of a call in the provider's currency units
    (docs/rules/format.md seed:messages, ``Usage.cost``)."""

    input: float
    output: float
    cacheRead: float
    cacheWrite: float
    total: float


class Usage(TypedDict):
    """Token counts and cost of one model call (docs/rules/format.md seed:messages)."""

    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    totalTokens: int
    cost: Cost


class SystemMessage(TypedDict):
    """Prompt and tool changes, replayed in order: ``sections`` patch by name (``None`` deletes), tools
    added/removed (docs/rules/format.md seed:messages, docs/rules/projection.md §3.6)."""

    role: Literal["system"]
    content: str | list[TextContent]
    sections: NotRequired[dict[str, str | None]]
    toolsAdded: NotRequired[list[dict[str, Any]]]
    toolsRemoved: NotRequired[list[dict[str, Any]]]
    timestamp: int  # Unix ms


class UserMessage(TypedDict):
    """A user turn; ``content`` is a string or text/image blocks; ``timestamp`` in Unix ms
    (docs/rules/format.md seed:messages)."""

    role: Literal["user"]
    content: str | list[TextContent | ImageContent]
    timestamp: int  # Unix ms


class AssistantMessage(TypedDict):
    """A model turn with its provider, model, usage and ``stopReason``
    (docs/rules/format.md seed:messages; ``"pending"`` never stored)."""

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
    """The result of one tool call, matched by ``toolCallId``
    (docs/rules/format.md seed:messages; ``nestedCalls`` bounded on write, docs/rules/projection.md §3.10)."""

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
    """A shell command run by the user; ``excludeFromContext`` for ``!!`` commands
    (docs/rules/format.md seed:extended-messages)."""

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
    """An extension message in context; ``display`` only affects the UI
    (docs/rules/format.md seed:extended-messages)."""

    role: Literal["custom"]
    customType: str
    content: str | list[TextContent | ImageContent]
    display: bool
    details: NotRequired[Any]
    timestamp: int


class BranchSummaryMessage(TypedDict):
    """Summary of an abandoned branch as a message (docs/rules/format.md seed:extended-messages)."""

    role: Literal["branchSummary"]
    summary: str
    fromId: str
    timestamp: int


AgentMessage = (
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage | BashExecutionMessage | CustomMessage
    | BranchSummaryMessage
)


class WorkflowLink(TypedDict):
    """Workflow ownership of an internal session; all three fields non-empty strings
    (docs/rules/format.md seed:header)."""

    runId: str
    stageId: str
    stageName: str


class SessionHeader(TypedDict):
    """First line of a file; metadata, not a tree entry (docs/rules/format.md seed:header)."""

    type: Literal["session"]
    version: int
    id: str
    createdAt: str  # ISO-8601 UTC with milliseconds
    cwd: str
    parentSessionId: NotRequired[str]
    internal: NotRequired[bool]
    workflow: NotRequired[WorkflowLink]


class SessionEntryBase(TypedDict):
    """Fields every entry has: 8-hex ``id`` (any non-empty string when read), ``parentId`` (``None`` for a
    root), ISO ``timestamp`` (docs/rules/format.md seed:entry-base)."""

    type: str
    id: str  # 8 hex characters when generated here
    parentId: str | None
    timestamp: str  # ISO-8601 UTC with milliseconds


class SessionMessageEntry(SessionEntryBase):
    """A conversation message (docs/rules/format.md seed:message-entry)."""

    message: AgentMessage


class ModelChangeEntry(SessionEntryBase):
    """The user switched models (docs/rules/format.md seed:model-change)."""

    provider: str
    modelId: str


class ThinkingLevelChangeEntry(SessionEntryBase):
    """The thinking level changed; stored as given (docs/rules/format.md seed:thinking-level-change)."""

    thinkingLevel: str


class ContextWindowChangeEntry(SessionEntryBase):
    """The selected context window, a positive number of tokens
    (docs/rules/format.md spec:data-model, docs/rules/projection.md §3.8)."""

    contextWindow: int  # tokens


class CompactionEntry(SessionEntryBase):
    """A compaction; active only with ``details.strategy == "verbatim-lines"``; ``firstKeptEntryId`` string,
    ``None`` or absent (docs/rules/format.md seed:compaction-entry)."""

    summary: str
    firstKeptEntryId: NotRequired[str | None]
    tokensBefore: int
    details: NotRequired[dict[str, Any]]
    fromHook: NotRequired[bool]
    systemMessage: NotRequired[SystemMessage]


class ContextCompactionEntry(SessionEntryBase):
    """Retired logical-deletion record: kept and round-tripped, never applied
    (docs/rules/format.md seed:context-compaction)."""

    promptVersion: int
    deletedTargets: list[dict[str, Any]]
    protectedEntryIds: list[str]
    stats: dict[str, Any]


class ContextEditEntry(SessionEntryBase):
    """Branch-local edit of one earlier entry's model content; ``None`` omits it
    (docs/rules/format.md seed:context-edit-entry)."""

    targetId: str
    replacement: dict[str, Any] | None  # None or {"content": str | blocks}


class BranchSummaryEntry(SessionEntryBase):
    """Summary of the branch left behind; ``fromId`` is the leaf that was left or ``"root"``
    (docs/rules/format.md seed:messages, docs/rules/decisions.md D-4)."""

    fromId: str
    summary: str
    details: NotRequired[Any]
    usage: NotRequired[Any]
    fromHook: NotRequired[bool]


class CustomEntry(SessionEntryBase):
    """Extension state; never in model context (docs/rules/format.md seed:custom-entry)."""

    customType: str
    data: NotRequired[Any]


class CustomMessageEntry(SessionEntryBase):
    """Extension message that is in model context (docs/rules/format.md seed:custom-message-entry)."""

    customType: str
    content: str | list[TextContent | ImageContent]
    display: bool
    details: NotRequired[Any]


class LabelEntry(SessionEntryBase):
    """Sets (non-empty ``label``) or clears (absent or ``""``) a bookmark on ``targetId``
    (docs/rules/format.md seed:label-entry)."""

    targetId: str
    label: NotRequired[str]


class SessionInfoEntry(SessionEntryBase):
    """Display name; an empty ``name`` clears it (docs/rules/format.md seed:session-info-entry)."""

    name: str


class SessionSummaryEntry(SessionEntryBase):
    """Generated one-line description, fresh only while ``summarizedThroughId`` is the newest user/assistant
    message (docs/rules/format.md seed:session-summary-entry)."""

    summary: str
    summarizedThroughId: str
    usage: NotRequired[Any]


SessionEntry = (
    SessionMessageEntry | ModelChangeEntry | ThinkingLevelChangeEntry | ContextWindowChangeEntry | CompactionEntry
    | ContextCompactionEntry | ContextEditEntry | BranchSummaryEntry | CustomEntry | CustomMessageEntry | LabelEntry
    | SessionInfoEntry | SessionSummaryEntry
)

#: An entry as the code passes it around: a plain ``dict`` with the file's own
#: camelCase keys, unknown types and fields kept (docs/rules/format.md
#: spec:data-model). :data:`SessionEntry` describes the known shapes; ``Entry`` is
#: the type of code that takes any entry, known or not.
Entry = dict[str, Any]

#: Every entry ``type`` the format defines; others are kept verbatim and inert (docs/rules/decisions.md D-10).
ENTRY_TYPES = frozenset({
    "message", "model_change", "thinking_level_change", "context_window_change",
    "compaction", "context_compaction", "context_edit", "branch_summary",
    "custom", "custom_message", "label", "session_info", "session_summary",
})

#: Entry types outside the format that sessiontree's own mappings write (docs/rules/format.md
#: "Entry types", docs/agents/): ``usage``, billed usage outside messages (Codex ``token_count``,
#: Claude Code subagent calls; the upstream agent writes it too), counted by ``stats``. Inert in
#: the context like an unknown type, but known: ``check`` does not warn about it. (``leaf``, the
#: upstream agent's other type, stays an unknown-type warning: sessiontree never writes it.)
MAPPED_ENTRY_TYPES = frozenset({"usage"})

#: Every message role of the format's AgentMessage union (plus legacy ``compactionSummary``).
MESSAGE_ROLES = frozenset({
    "system", "user", "assistant", "toolResult", "bashExecution", "custom",
    "branchSummary", "compactionSummary",
})
