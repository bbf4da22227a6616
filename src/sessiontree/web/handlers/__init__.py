"""The viewer's request handlers, one module per page (docs/viewer.md): ``listing`` (the
session list and the ``redacted`` toggle), ``session`` (the session page and what its
script fetches), ``compare`` (the compare page); ``common`` holds what they share.

A handler is ``handler(state, request) -> Response`` over the typed
:class:`sessiontree.web.state.ViewerState`; :data:`sessiontree.web.routes.ROUTES` maps
paths to them.
"""
