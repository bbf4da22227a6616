"""Markdown of session text, rendered safe for a page.

CommonMark (with tables and strikethrough) by ``markdown-it-py``, raw HTML
disabled, its link validation on (no ``javascript:``, ``vbscript:``,
``file:`` or non-image ``data:`` URLs); an image is drawn only from a
``data:`` URL of a raster type with a base64 payload.
"""

from __future__ import annotations

import functools
import re
from typing import Any, cast

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markupsafe import Markup, escape

from sessiontree.core.textsafe import safe_block

__all__ = [
    "markdown_html",
]

# CommonMark with tables and strikethrough; raw HTML off (session text is
# untrusted), typographer and linkify off (what the model wrote is shown as
# written). markdown-it's default validateLink refuses javascript:, vbscript:,
# file: and non-image data: URLs.
_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"])
_RENDERER = cast(RendererHTML, _MD.renderer)  # "commonmark" renders HTML
_DEFAULT_IMAGE = _RENDERER.rules["image"]
#: A Markdown image is drawn only from a ``data:`` URL of a raster type with a
#: base64 payload; any other source would make the browser fetch a URL the
#: session chose (blocked by the Content-Security-Policy anyway).
_MD_IMAGE_SRC = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}\Z", re.IGNORECASE)


def _md_image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = token.attrGet("src") or ""
    if _MD_IMAGE_SRC.match(src):
        return str(_DEFAULT_IMAGE(tokens, idx, options, env))
    alt = self.renderInlineAsText(token.children or [], options, env)
    return str(escape(f"[image: {alt}] ({src})"))


_RENDERER.rules["image"] = _md_image.__get__(_RENDERER)


@functools.lru_cache(maxsize=1024)
def markdown_html(text: str) -> Markup:
    """``text`` rendered as Markdown, safe to put in a page.

    Raw HTML in ``text`` is shown as text; control characters as visible escapes
    (:func:`~sessiontree.core.textsafe.safe_block`); links with dangerous schemes are
    left as text. Never raises on odd input. Remembered for the last 1,024 texts:
    the export renders each message in the raw and the model's view.
    """
    # Control characters, bidi overrides and invisible characters are shown as escapes
    # (docs/terminal-output.md): the page's finalize passes Markup through unchanged.
    return Markup(_MD.render(safe_block(text)))
