"""The session page (``/s/{id}``) and what its script fetches: the conversation pane's
windows, the tree's rows and summaries, the live-update state; ``/s/PARENT/AGENT``.

Each session is read by the read service once per change (skeletons where the store
reads them cheaply; docs/viewer.md, "What is sent when"); what a page derives from it
(the tree's layout, a branch's path, the agent's format, the provenance, the insights)
is kept with that read (:meth:`ReadOnlySession.kept`). Every answer names its leaf, so
requests served at once share a session without a lock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from sessiontree.core.textsafe import shell_join, shell_quote
from sessiontree.errors import EntryNotFoundError
from sessiontree.format.foreign import agent_of_header
from sessiontree.format.foreign.gemini import resume_command as gemini_resume_command
from sessiontree.format.foreign.omp import resume_command as omp_resume_command
from sessiontree.session.reading import ReadOnlySession
from sessiontree.stores.base import SyncState
from sessiontree.sync.provenance import agent_format
from sessiontree.sync.restore import resume_command
from sessiontree.web import page
from sessiontree.web import views as view
from sessiontree.web.handlers.common import as_int, json_response, requested_session, to_full_id, where
from sessiontree.web.state import ViewerState

__all__ = ["FIRST_WINDOW_ITEMS", "conversation", "rows_json", "session_page", "state_json", "subagent_page",
           "summaries_json", "tree_json"]

#: Conversation entries of the first window a session page shows (earlier ones
#: load as the reader scrolls up, :data:`sessiontree.web.views.WINDOW_ITEMS` at a time).
FIRST_WINDOW_ITEMS = 60

ReadStates = Callable[[], Mapping[str, SyncState]]


def _tree(session: ReadOnlySession) -> view.TreeData:
    """The tree rows of a session, laid out once per read from its loaded leaf."""

    def lay_out() -> view.TreeData:
        tree = view.build_tree_data(session, summaries=False)
        tree.loader = session.read_entries
        return tree

    return session.kept(("tree",), lay_out)


def _conversation(state: ViewerState, session: ReadOnlySession, request: Request, limit: int = view.WINDOW_ITEMS,
                  read_states: ReadStates | None = None) -> view.Conversation | Response:
    """The conversation window the query asks for, its subagent calls linked to the
    subagents' own sessions when the store holds them (``<parent>-agent-<agent id>``,
    docs/agents/claude-code.md); 404 for an unknown leaf."""
    conv = _conversation_window(state, session, request, limit, read_states)
    if isinstance(conv, view.Conversation):
        for part in conv.subagent_calls():
            child = f"{session.session_id}-agent-{part.agent_id}"
            if state.store.exists(child):
                part.subagent_link = child
    return conv


def _conversation_window(state: ViewerState, session: ReadOnlySession, request: Request, limit: int,
                         read_states: ReadStates | None) -> view.Conversation | Response:
    p = request.query_params
    leaf = p.get("leaf") or None
    start = as_int(p.get("start"), -1)
    stop = as_int(p.get("stop"), -1)
    if start >= 0 and stop > start:
        limit = min(limit, stop - start)  # an earlier window ends where the shown one starts
    around = p.get("around") or None
    try:
        if p.get("view") == "model":
            # What pi sent needs the agent's format (docs/viewer.md): once per session read.
            written_in = session.kept(("agent-format",), lambda: agent_format(
                state.store, session.session_id, read_states=read_states))
            return view.build_conversation(session.whole(), leaf, "model", start=start if start >= 0 else None,
                                           around=around, limit=limit, kept=True, agent_format=written_in)
        # The raw view reads only the window's entries: the branch comes from skeletons.
        path = session.kept(("path", leaf), lambda: _path(session, leaf), bound=8)
        return view.build_branch_window(path, session.read_entries, start=start if start >= 0 else None,
                                        around=around, limit=limit)
    except EntryNotFoundError:
        return PlainTextResponse("No such entry in this session", status_code=404)


def _path(session: ReadOnlySession, leaf: str | None) -> Sequence[Mapping[str, Any]]:
    """The branch ending at ``leaf`` (``None``: the loaded leaf), root first, as the tree
    holds it (skeletons): the layout's own walk of the active path when it made one.

    Raises:
        EntryNotFoundError: unknown ``leaf``.
    """
    tree = _tree(session)
    at = leaf if leaf is not None else session.get_leaf_id()
    if at is not None and at == tree.leaf_id and tree.active_path is not None:
        return tree.active_path
    return session.get_branch(leaf)


def _resume(state: ViewerState, session: ReadOnlySession, read_states: ReadStates) -> str | None:
    """The command that resumes the session in its agent (docs/agent-loop.md)."""
    header = session.get_header()
    agent = agent_of_header(header)
    if agent == "gemini":  # Gemini CLI's own command (docs/agents/gemini.md)
        return shell_join(gemini_resume_command(session.session_id))
    if agent == "omp":  # oh-my-pi's own, in the session's cwd
        cwd = str(header.get("cwd") or "")
        command = shell_join(omp_resume_command(session.session_id))
        return f"cd {shell_quote(cwd)} && {command}" if cwd else command
    return resume_command(state.store, session.session_id, str(header.get("cwd") or ""), read_states=read_states,
                          own=agent)


def session_page(state: ViewerState, request: Request) -> Response:
    """``GET /s/{id}?leaf=ENTRY&view=raw|model``: the session page; a prefix or
    ``PARENT/AGENT`` redirects to the whole id."""
    session = requested_session(state, request)
    if session is None:
        return to_full_id(state, request, request.path_params["session_id"])
    tree = _tree(session)
    # One read of the sync states serves the agent's format and the resume command;
    # a failed read is not kept, so each still sees its own error as before.
    read_states = functools.cache(state.store.sync_states)
    conv = _conversation(state, session, request, FIRST_WINDOW_ITEMS, read_states)
    if isinstance(conv, Response):
        return conv
    window = tree.window(leaf=conv.leaf_id, find=conv.leaf_id)
    resume = _resume(state, session, read_states)
    # Where the session came from (docs/sync.md, "Provenance"), once per session read.
    origin = session.kept(("origin",), lambda: state.store.provenances().get(session.session_id))

    def insights() -> dict[str, object]:
        # Every entry of every branch (docs/insights.md): once per session read.
        from sessiontree.usage.insights import insights_of_entries

        return insights_of_entries(session.session_id, session.whole().get_entries()).to_dict()

    html = page.render_session_page(session, tree, conv, version=session.version, window=window,
                                    resume_command=resume, redacted=session.redacted, here=where(request),
                                    origin=origin, insights=session.kept(("insights",), insights))
    return HTMLResponse(html)


def subagent_page(state: ViewerState, request: Request) -> Response:
    """``/s/PARENT/AGENT``: a subagent session addressed under its parent, as lists print it."""
    return to_full_id(state, request, f"{request.path_params['session_id']}/{request.path_params['agent']}")


def conversation(state: ViewerState, request: Request) -> Response:
    """``GET /s/{id}/conversation``: the conversation pane's HTML for one window
    (``leaf``, ``view``, ``start`` or ``around``)."""
    session = requested_session(state, request)
    if session is None:
        return PlainTextResponse("No such session", status_code=404)
    conv = _conversation(state, session, request)
    if isinstance(conv, Response):
        return conv
    return HTMLResponse(page.render_conversation(conv, request.path_params["session_id"]))


def tree_json(state: ViewerState, request: Request) -> Response:
    """``GET /s/{id}/tree.json``: all tree rows (:class:`sessiontree.web.views.TreeData`)."""
    session = requested_session(state, request)
    if session is None:
        return JSONResponse({"error": "no such session"}, status_code=404)
    return Response(_tree(session).json_text(), media_type="application/json")


def rows_json(state: ViewerState, request: Request) -> Response:
    """``GET /s/{id}/rows.json?filter=&folded=I,J&leaf=&offset=&limit=&find=``: one window of
    the visible tree rows (:meth:`sessiontree.web.views.TreeData.window`)."""
    session = requested_session(state, request)
    if session is None:
        return JSONResponse({"error": "no such session"}, status_code=404)
    p = request.query_params
    mode = p.get("filter", "default")
    if mode not in {value for value, _ in view.FILTER_MODES}:
        mode = "default"
    folded = {as_int(v, -1) for v in p.get("folded", "").split(",") if v}
    window = _tree(session).window(mode=mode, folded=folded, leaf=p.get("leaf") or None,
                                   offset=as_int(p.get("offset"), 0),
                                   limit=as_int(p.get("limit"), view.TREE_WINDOW_ROWS), find=p.get("find") or None)
    return json_response({"version": session.version, **window})


def summaries_json(state: ViewerState, request: Request) -> Response:
    """``GET /s/{id}/summaries.json?rows=I,J,...``: one-line summaries of tree rows (large
    sessions send the tree without them)."""
    session = requested_session(state, request)
    if session is None:
        return JSONResponse({"error": "no such session"}, status_code=404)
    wanted = [as_int(v, -1) for v in request.query_params.get("rows", "").split(",")[:500]]
    found = _tree(session).summaries(wanted)
    return json_response({"version": session.version, "summaries": {str(k): v for k, v in found.items()}})


def state_json(state: ViewerState, request: Request) -> Response:
    """``GET /s/{id}/state.json``: ``{"version", "entries", "leaf"}``, polled every second
    by the page for live updates."""
    session = requested_session(state, request)
    if session is None:
        return JSONResponse({"error": "no such session"}, status_code=404)
    version = session.version
    return json_response({"version": version, "entries": int(version.split(":")[0]), "leaf": session.get_leaf_id()})
