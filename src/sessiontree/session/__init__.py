"""Working on one session at a time: the ``SessionManager`` API.

:mod:`.manager` is the synchronous manager, :mod:`.aio` the asynchronous one,
:mod:`.builders` the entry builders both use, :mod:`.importing` the grouped
import of JSONL files, :mod:`.lazy` the lazy open of a stored session. May
import the stores (through :mod:`sessiontree.stores` and the
:class:`~sessiontree.stores.base.SessionStore` protocol) and the layers below them.
"""
