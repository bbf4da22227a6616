"""The web viewer: ``sessiontree serve`` and ``export --format html`` (docs/viewer.md).

* :mod:`sessiontree.web.views`: view models (tree rows, conversation items,
  projection marks, the session list) built from the library;
* :mod:`sessiontree.web.page`: the one HTML renderer (Jinja2 templates in
  ``templates/``, assets in ``static/``), shared by the server and the export;
* :mod:`sessiontree.web.app`: the Starlette application (read-only, loopback
  by default, Host-checked, strict CSP).

The heavy imports (Starlette, Jinja2) happen only when these modules are
imported, so the rest of the command line does not pay for them.
"""

from typing import Any

__all__ = ["create_app", "render_session_document"]


def __getattr__(name: str) -> Any:  # PEP 562: lazy, as in sessiontree/__init__.py
    if name == "create_app":
        from sessiontree.web.app import create_app

        return create_app
    if name == "render_session_document":
        from sessiontree.web.page import render_session_document

        return render_session_document
    raise AttributeError(f"module 'sessiontree.web' has no attribute {name!r}")
