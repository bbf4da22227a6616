"""Markdown export shows session HTML as text (docs/terminal-output.md, "Exports").

A previewer that renders HTML inside Markdown must find none in the export: the
check parses the document with markdown-it in CommonMark mode (raw HTML on, as
such previewers have it) and requires that no token is raw HTML, while code
blocks and inline code keep their text unchanged.
"""

from __future__ import annotations

from markdown_it import MarkdownIt

from sessiontree.core.render import markdown_transcript

PAYLOAD = "<script>alert(1)</script> <img src=x onerror=alert(2)> &lt;b&gt; &#60;i>"
HEADER = {"type": "session", "version": 4, "id": "019cadb4-6e80-7a3c-9b1d-0000000000d1",
          "createdAt": "2026-03-02T09:00:00.000Z", "cwd": "/p/<svg onload=x>"}


def _message(n: int, message: dict) -> dict:
    return {"type": "message", "id": f"m{n}", "parentId": f"m{n - 1}" if n else None,
            "timestamp": "2026-03-02T09:00:00.000Z", "message": {"timestamp": n, **message}}


def _branch() -> list[dict]:
    call = {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "echo '<b>'"}}
    return [
        _message(0, {"role": "user", "content": PAYLOAD + "\n\nkeep `<code>` and a < b && c\n\n```html\n<p>&amp;</p>\n```"}),
        _message(1, {"role": "assistant", "content": [
            {"type": "text", "text": "\\`" + PAYLOAD + "`"},  # an escaped backtick opens no code span
            {"type": "thinking", "thinking": "think " + PAYLOAD},
            {"type": "image", "mimeType": "image/<img src=y onerror=alert(3)>", "data": "AAAA"}, call],
            "stopReason": "toolUse"}),
        _message(2, {"role": "toolResult", "toolCallId": "c1", "toolName": "t<img src=z onerror=alert(4)>",
                     "content": [{"type": "text", "text": "<b>out</b>"}], "isError": False}),
        {"type": "branch_summary", "id": "m3", "parentId": "m2", "timestamp": "2026-03-02T09:00:00.000Z",
         "fromId": "m0", "summary": "summary " + PAYLOAD},
    ]


def test_markdown_export_holds_no_raw_html_outside_code():
    text = markdown_transcript(HEADER, _branch(), title="title <script>alert(5)</script>")
    tokens = MarkdownIt("commonmark").parse(text)

    def walk(tokens):
        for token in tokens:
            yield token
            yield from walk(token.children or [])

    html = [t.content for t in walk(tokens) if t.type in ("html_block", "html_inline")]
    assert html == [], html
    # shown as text, so a reader still sees it (rendered: "<script>alert(1)</script>")
    rendered = MarkdownIt("commonmark").render(text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered and "<script" not in rendered
    assert "&amp;lt;b&amp;gt;" in rendered  # an entity in the session shows as the entity's text
    # code keeps its text, and a lone "<" or "&" in prose is left readable
    assert "keep `<code>` and a < b && c" in text
    assert "```html\n<p>&amp;</p>\n```" in text
    assert "```\n<b>out</b>\n```" in text
