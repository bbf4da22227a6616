"""Usage of one session (``sessiontree show``, the status line): every billed record it
holds, and the part a fork or import copied from an earlier session (docs/usage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessiontree.core.usage import UsageQuery
from sessiontree.stores.base import SessionStore
from sessiontree.usage.prices import PriceCatalog
from sessiontree.usage.totals import SCHEMA_VERSION, LazyCatalog, Totals, check_mode, model_name, row_totals

__all__ = ["SessionUsage", "session_usage"]


@dataclass
class SessionUsage:
    """Usage of one session (``show``): every billed record the session holds.

    Attributes:
        session_id: the session.
        totals: all its records (what its transcript records).
        copied: the part also held by an earlier session (a fork's or import's
            copied history): not billed again, so ``stats`` counts it there.
        by_model: ``provider/model`` -> totals of all its records.
        cost_mode, catalog: as in :class:`UsageReport`.
    """

    session_id: str
    totals: Totals
    copied: Totals
    by_model: dict[str, Totals]
    cost_mode: str
    catalog: str | None

    @property
    def billed(self) -> Totals:
        """``totals`` minus ``copied``: what this session itself adds to the store's bill."""
        t = Totals()
        t.merge(self.totals)
        for name in ("calls", "input", "output", "cache_read", "cache_write", "cost_nanos", "recorded_nanos",
                     "estimated_nanos", "recorded_calls", "estimated_calls", "unpriced_calls", "unpriced_tokens"):
            setattr(t, name, getattr(t, name) - getattr(self.copied, name))
        return t

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"schemaVersion", "sessionId", "costMode", "catalog", "totals",
        "copied", "billed", "models": {name: totals}}``."""
        return {"schemaVersion": SCHEMA_VERSION, "sessionId": self.session_id, "costMode": self.cost_mode,
                "currency": "USD", "catalog": self.catalog, "totals": self.totals.to_dict(),
                "copied": self.copied.to_dict(), "billed": self.billed.to_dict(),
                "models": {name: t.to_dict() for name, t in sorted(self.by_model.items())}}


def session_usage(store: SessionStore, session_id: str, *, cost: str = "auto",
                  catalog: PriceCatalog | None = None) -> SessionUsage:
    """Tokens and cost of one session's records (``sessiontree show``).

    Raises:
        ValueError: an unknown cost mode.
        StorageError: the store could not be read.
    """
    check_mode(cost)
    rows = store.usage(UsageQuery(session_id=session_id, price_all=cost == "catalog", by_time=False))
    lazy = LazyCatalog(catalog)
    totals, copied = Totals(), Totals()
    by_model: dict[str, Totals] = {}
    for row in rows:
        into = [totals, by_model.setdefault(model_name(row.provider, row.model), Totals())]
        if row.copied:
            into.append(copied)
        row_totals(row, cost, lazy, into)
    lazy.finish()
    return SessionUsage(session_id, totals, copied, by_model, cost,
                        lazy.used.name if lazy.used is not None else None)
