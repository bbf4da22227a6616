"""Reading one session: its tree, its projection, its transcript and listing.

Pure functions over a session's entries, with no I/O: the entry tree and
branches (:mod:`.tree`), the model context a branch rebuilds to
(:mod:`.projection`), the transcript shapes (:mod:`.transcript`), the listing
columns (:mod:`.listing`), the text a search matches (:mod:`.search`), the
billed usage records (:mod:`.usage`), rendering for terminals and pages
(:mod:`.render`, :mod:`.textsafe`).

May import :mod:`sessiontree.format` and :mod:`sessiontree.errors` only.
"""
