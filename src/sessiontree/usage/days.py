"""Days of a usage report: time zones, ``--since`` / ``--until`` bounds, local days
(docs/usage.md: day boundaries are those of the user's local zone, the C library's rules
with daylight saving, or of ``--timezone``).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["local_time", "parse_date_bound", "resolve_timezone", "start_of_day_ms"]


def resolve_timezone(name: str | None) -> tzinfo | None:
    """``None`` for the local zone, else the IANA zone ``name`` (``"UTC"``, ``"Europe/Berlin"``)
    or a fixed offset ``"+01:00"`` / ``"-0530"``.

    Raises:
        ValueError: an unknown zone name.
    """
    if name is None or name == "":
        return None
    match = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name)
    if match:
        sign = 1 if match.group(1) == "+" else -1
        return timezone(sign * timedelta(hours=int(match.group(2)), minutes=int(match.group(3))))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin, UTC, "
                         "or an offset such as +01:00)") from exc


def local_time(ms: int, tz: tzinfo | None) -> datetime:
    """Unix milliseconds as a time of ``tz`` (naive local time when ``None``)."""
    if tz is None:
        return datetime.fromtimestamp(ms / 1000)  # naive local time: the C library applies DST
    return datetime.fromtimestamp(ms / 1000, tz)


def start_of_day_ms(day: date, tz: tzinfo | None) -> int:
    """The first millisecond of ``day`` in ``tz`` (local time when ``None``), as Unix
    milliseconds (an ``int``): the lower bound of a day's usage (docs/usage.md, "Time"). In local
    time the C library applies the day's DST offset; raises nothing for a valid ``date``."""
    midnight = datetime(day.year, day.month, day.day)
    if tz is not None:
        midnight = midnight.replace(tzinfo=tz)
    return int(midnight.timestamp() * 1000)  # naive: local time, as mktime reads it


def parse_date_bound(text: str, tz: tzinfo | None, *, end: bool, now_ms: int | None = None) -> int:
    """A ``--since`` / ``--until`` value as Unix milliseconds.

    Accepts ``YYYY-MM-DD``, ``YYYYMMDD`` (ccusage's form) and, for ``--since``,
    ``Nd`` / ``Nw`` (the last N days or weeks including today: ``7d`` starts at
    midnight six days ago). Dates are days of ``tz`` (local when ``None``).

    Args:
        end: ``True`` for ``--until``: the day is included, so the bound is the
            next midnight (exclusive).
        now_ms: "today" for relative values (default: now).

    Raises:
        ValueError: anything else.
    """
    text = text.strip()
    relative = re.fullmatch(r"(\d+)([dw])", text)
    if relative:
        if end:
            raise ValueError(f"--until takes a date (YYYY-MM-DD), not {text!r}")
        count = int(relative.group(1)) * (7 if relative.group(2) == "w" else 1)
        if count < 1:
            raise ValueError(f"{text!r}: the count must be at least 1")
        now = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
        today = local_time(now, tz).date()
        return start_of_day_ms(today - timedelta(days=count - 1), tz)
    for pattern in ("%Y-%m-%d", "%Y%m%d"):
        try:
            day = datetime.strptime(text, pattern).date()
            break
        except ValueError:
            continue
    else:
        raise ValueError(f"invalid date {text!r}: use YYYY-MM-DD, YYYYMMDD or a count of days such as 7d")
    return start_of_day_ms(day + timedelta(days=1) if end else day, tz)
