"""Totals of billed calls and how each store row is priced (docs/usage.md, "Costs").

:class:`Totals` is what every usage report sums; :func:`row_totals` prices one row of
:meth:`~sessiontree.stores.base.SessionStore.usage` by the cost mode (the recorded cost,
else the catalogue of :mod:`sessiontree.usage.prices`); :func:`price_records` and
:func:`price_rows` price records or rows the caller has chosen (a branch, a session's
turn). The invariants ("money is exact", "a partial total never looks complete", the
cost modes) are those of :mod:`sessiontree.usage.report`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.usage import TokenCounts, UsageQuery, UsageRecord, UsageRow, rows_from_records
from sessiontree.usage.choices import COST_MODES
from sessiontree.usage.money import format_usd, nanos_to_decimal
from sessiontree.usage.prices import GenaiPricesCatalog, PriceCatalog, default_catalog

__all__ = ["SCHEMA_VERSION", "UNKNOWN", "LazyCatalog", "Totals", "check_mode", "cost_text", "model_name", "price_records",
           "price_rows", "row_totals", "rows_query", "turn_cost"]

#: Version of the JSON shape of the reports' ``to_dict`` (docs/usage.md). Raised only when
#: a field changes meaning or disappears; new fields may appear.
SCHEMA_VERSION = 1

#: The name of a provider, model, host or user that was not recorded.
UNKNOWN = "unknown"


@dataclass(slots=True)
class Totals(TokenCounts):
    """Sums of one group (or of everything).

    Attributes:
        calls: billed calls (records) counted once each.
        input, output, cache_read, cache_write: tokens.
        cost_nanos: the cost shown: recorded plus estimated, nano-dollars.
        recorded_nanos: the part taken from recorded costs.
        estimated_nanos: the part priced from the catalogue.
        recorded_calls, estimated_calls, unpriced_calls: how each call was priced
            (a call with no tokens and no cost counts as recorded, at 0).
        unpriced_tokens: tokens of the unpriced calls (not in ``cost_nanos``).
        models: ``provider/model`` names seen.
        unpriced_models: ``provider/model`` names of unpriced calls.
    """

    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_nanos: int = 0
    recorded_nanos: int = 0
    estimated_nanos: int = 0
    recorded_calls: int = 0
    estimated_calls: int = 0
    unpriced_calls: int = 0
    unpriced_tokens: int = 0
    models: set[str] = field(default_factory=set)
    unpriced_models: set[str] = field(default_factory=set)

    def merge(self, other: Totals) -> None:
        """Add ``other`` into this total."""
        # Written out (not a loop over names): the dashboard merges every row into several views.
        self.calls += other.calls
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.cost_nanos += other.cost_nanos
        self.recorded_nanos += other.recorded_nanos
        self.estimated_nanos += other.estimated_nanos
        self.recorded_calls += other.recorded_calls
        self.estimated_calls += other.estimated_calls
        self.unpriced_calls += other.unpriced_calls
        self.unpriced_tokens += other.unpriced_tokens
        self.models |= other.models
        self.unpriced_models |= other.unpriced_models

    def to_dict(self) -> dict[str, Any]:
        """JSON form (docs/usage.md): token counts as integers, money as a USD decimal
        string plus integer nano-dollars."""
        return {
            "calls": self.calls,
            "inputTokens": self.input,
            "outputTokens": self.output,
            "cacheReadTokens": self.cache_read,
            "cacheWriteTokens": self.cache_write,
            "totalTokens": self.total_tokens,
            "cost": str(nanos_to_decimal(self.cost_nanos)),
            "costNanos": self.cost_nanos,
            "recordedCost": str(nanos_to_decimal(self.recorded_nanos)),
            "estimatedCost": str(nanos_to_decimal(self.estimated_nanos)),
            "recordedCalls": self.recorded_calls,
            "estimatedCalls": self.estimated_calls,
            "unpricedCalls": self.unpriced_calls,
            "unpricedTokens": self.unpriced_tokens,
            "models": sorted(self.models),
            "unpricedModels": sorted(self.unpriced_models),
        }


def model_name(provider: str | None, model: str | None) -> str:
    """``provider/model``, ``unknown`` for a part not recorded."""
    return f"{provider or UNKNOWN}/{model or UNKNOWN}"


def row_totals(row: UsageRow, mode: str, catalog: Callable[[], PriceCatalog],
                into: Iterable[Totals] = ()) -> Totals | None:
    """Price one store row by the cost mode; add it to each of ``into`` (returns ``None``)
    or, with no ``into``, return it as a new :class:`Totals`."""
    targets = list(into)
    given = bool(targets)
    name = model_name(row.provider, row.model)
    if row.total_tokens == 0 or (row.recorded and mode != "catalog"):
        # Recorded (a row without tokens is free in every mode: its 0 is true, not missing).
        if not given:
            targets.append(Totals())
        for t in targets:
            t.calls += row.calls
            t.input += row.input
            t.output += row.output
            t.cache_read += row.cache_read
            t.cache_write += row.cache_write
            t.recorded_calls += row.calls
            t.recorded_nanos += row.cost_nanos
            t.cost_nanos += row.cost_nanos
            t.models.add(name)
        return None if given else targets[0]
    t = Totals(calls=row.calls, input=row.input, output=row.output, cache_read=row.cache_read,
               cache_write=row.cache_write)
    t.models.add(name)
    price = None
    if mode != "recorded" and row.per_call and row.calls:
        n = row.calls
        hour = {"cache_write_1h": row.cache_write_1h // n} if row.cache_write_1h else {}
        one = catalog().price(row.provider, row.model, row.input // n, row.output // n, row.cache_read // n,
                              row.cache_write // n, row.bucket, **hour)
        price = None if one is None else one * n
    if price is None:
        t.unpriced_calls = row.calls
        t.unpriced_tokens = row.total_tokens
        t.unpriced_models.add(name)
    else:
        t.estimated_calls = row.calls
        t.estimated_nanos = t.cost_nanos = price
    if given:
        for target in targets:
            target.merge(t)
        return None
    return t


class LazyCatalog:
    """Creates the catalogue only when a row needs one, and remembers whether it did.

    Args:
        given: the caller's catalogue, or ``None`` for the process's default one
            (:func:`~sessiontree.usage.prices.default_catalog`).
    """

    def __init__(self, given: PriceCatalog | None) -> None:
        self.given = given
        self.used: PriceCatalog | None = None

    def __call__(self) -> PriceCatalog:
        if self.used is None:
            self.used = self.given if self.given is not None else default_catalog()
        return self.used

    def finish(self) -> None:
        """Keep what the default catalogue worked out in its cache file (usage/prices.py)."""
        if isinstance(self.used, GenaiPricesCatalog):
            self.used.flush()


def check_mode(cost: str) -> None:
    """Raises ValueError for a cost mode not in :data:`~sessiontree.usage.choices.COST_MODES`."""
    if cost not in COST_MODES:
        raise ValueError(f"unknown cost mode {cost!r}: expected one of {', '.join(COST_MODES)}")


def price_records(records: Iterable[UsageRecord], *, cost: str = "auto",
                  catalog: PriceCatalog | None = None) -> tuple[Totals, str | None]:
    """Tokens and cost of ``records`` as given, each counted once, priced by the same
    rules as :func:`usage_report` (the caller has already decided which records belong).

    Returns:
        The totals and the name of the catalogue used (``None`` when none was needed).

    Raises:
        ValueError: an unknown cost mode.
    """
    check_mode(cost)
    return price_rows(rows_from_records(records, rows_query(cost)), cost=cost, catalog=catalog)


def turn_cost(records: Iterable[UsageRecord]) -> str:
    """The cost of a turn's records as the CLI shows costs (docs/usage.md): ``$0.12``,
    ``~`` when any part was priced from the catalogue, `` +?`` when calls stayed
    unpriced; ``""`` when the turn billed nothing. The viewer's turn line and the
    Markdown export's (docs/viewer.md, "Turns"); here, beside :func:`price_records`,
    so that the export does not import the viewer's modules for it."""
    records = records if isinstance(records, list) else list(records)
    if not records:
        return ""
    recorded = [r.cost_nanos for r in records]
    if None not in recorded:
        # Every call's cost recorded (the usual case): their sum, which is what
        # price_records gives then (recorded costs are taken as they are, nothing is
        # estimated or unpriced), without grouping the records into rows per turn.
        return format_usd(sum(recorded))  # type: ignore[arg-type]
    return cost_text(price_records(records)[0])


def cost_text(totals: Totals, places: int = 2) -> str:
    """The cost of ``totals`` as the CLI, the viewer and the export show costs (docs/usage.md):
    ``$42.60`` (``places`` decimals, :func:`format_usd`); a leading ``~`` marks a cost with
    estimated parts, a trailing `` +?`` one missing unpriced calls."""
    text = format_usd(totals.cost_nanos, places)
    if totals.estimated_calls:
        text = "~" + text
    if totals.unpriced_calls:
        text += " +?"
    return text


def rows_query(cost: str) -> UsageQuery:
    """The grouping :func:`price_rows` prices by for a cost mode: no time buckets where a
    recorded cost is used, every call apart by its tokens for ``catalog``."""
    return UsageQuery(price_all=cost == "catalog", by_time=False)


def price_rows(rows: Iterable[UsageRow], *, cost: str = "auto",
               catalog: PriceCatalog | None = None) -> tuple[Totals, str | None]:
    """:func:`price_records` for records already summed into rows grouped by
    :func:`rows_query` of the same ``cost`` (e.g.
    :func:`~sessiontree.core.usage.rows_from_entries`).

    Returns:
        The totals and the name of the catalogue used (``None`` when none was needed).

    Raises:
        ValueError: an unknown cost mode.
    """
    check_mode(cost)
    lazy = LazyCatalog(catalog)
    totals = Totals()
    for row in rows:
        row_totals(row, cost, lazy, (totals,))
    lazy.finish()
    return totals, lazy.used.name if lazy.used is not None else None
