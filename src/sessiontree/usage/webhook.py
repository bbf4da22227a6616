"""POSTing a budget crossing to a webhook (docs/budgets.md, "Webhook").

One small JSON object (:meth:`sessiontree.usage.budgets.Crossing.payload`) per
crossing, ``Content-Type: application/json``, with a short timeout. A failed POST
is reported to the caller, never raised: a webhook that is down must not stop a
``sync --watch``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from sessiontree import __version__

__all__ = ["TIMEOUT_SECONDS", "post_json"]

#: How long one POST may take before it is given up.
TIMEOUT_SECONDS = 5.0


def post_json(url: str, payload: dict[str, Any], *, timeout: float = TIMEOUT_SECONDS) -> str | None:
    """POST ``payload`` as JSON to ``url`` (``http://`` or ``https://`` only).

    Returns:
        ``None`` when the server answered 2xx, else one line saying what went wrong.
    """
    if not url.lower().startswith(("http://", "https://")):
        return f"not an http(s) URL: {url}"
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": f"sessiontree/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # the scheme was checked above
            status = response.status
    except urllib.error.HTTPError as exc:
        return f"the webhook answered {exc.code} {exc.reason}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return f"the webhook could not be reached: {reason}"
    return None if 200 <= status < 300 else f"the webhook answered {status}"
