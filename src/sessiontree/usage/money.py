"""Money as ``stats`` and the status line show it: integer nano-dollars (1e-9 USD) as an
exact decimal or a rounded ``$`` amount (docs/usage.md, "Money is exact").

Light on purpose (the decimal module only): the command line formats amounts without
loading the usage report, the stores or the price catalogue (docs/architecture.md,
"Start-up").
"""

from __future__ import annotations

from decimal import Decimal

__all__ = ["format_usd", "nanos_to_decimal"]


def nanos_to_decimal(nanos: int) -> Decimal:
    """Nano-dollars as an exact :class:`~decimal.Decimal` of USD, without trailing zeros
    (``42595907500`` -> ``Decimal("42.5959075")``)."""
    value = Decimal(nanos).scaleb(-9)
    normal = value.normalize()
    # normalize() writes 100 as 1E+2; keep a plain exponent of at most 0.
    exponent = normal.as_tuple().exponent
    # A finite Decimal's exponent is an int (the str forms are NaN and infinity).
    return normal if isinstance(exponent, int) and exponent <= 0 else value.quantize(Decimal(1))


def format_usd(nanos: int, places: int = 2) -> str:
    """``"$42.60"``: nano-dollars rounded half-even to ``places`` decimals, for display."""
    value = Decimal(nanos).scaleb(-9).quantize(Decimal(1).scaleb(-places))
    return f"${value:,}"
