"""The values of ``stats --by`` and ``--cost`` (docs/usage.md), in a module of their own.

The command line builds its options from them when a command is loaded; importing
:mod:`sessiontree.usage.report` for two tuples would load the stores and the price
catalogue at start-up (docs/architecture.md, "Start-up"). :mod:`.report` re-exports both.
"""

#: ``--by`` values.
GROUPINGS = ("day", "week", "month", "session", "model", "provider", "project", "agent", "host", "user")
#: ``--cost`` values.
COST_MODES = ("auto", "recorded", "catalog")
