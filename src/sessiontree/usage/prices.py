"""Catalogue prices of calls without a usable recorded cost, and the cache that keeps them
(docs/usage.md, "Costs"; docs/decisions/price-cache.md).

The catalogue is the ``genai-prices`` package's bundled table. Importing it (pydantic
included) takes about a third of a second and pricing one call shape about half a
millisecond, so a report of a Claude Code home (no recorded costs: every call estimated,
about three distinct shapes a session) spent most of its time there. Each answer is
therefore kept in a small SQLite file in the user's cache folder, keyed by the call's
priced shape and day, one file per ``genai-prices`` version: a later report reads the
answers from it and never imports the catalogue unless it meets a shape it has not priced
yet. The answers are the catalogue's own, so a cached price equals an uncached one to the
nano-dollar (tests/usage/test_price_cache.py).

The cache is best effort: a folder that cannot be written, a damaged or locked file, or a
read-only file system leave it out (prices are then worked out each time, as before).
``SESSIONTREE_PRICE_CACHE=off`` turns it off; ``SESSIONTREE_PRICE_CACHE=DIR`` keeps it in
``DIR``.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from decimal import Decimal
from typing import Protocol

from sessiontree.core.usage import NANOS_PER_USD

__all__ = ["CACHE_ENV", "GenaiPricesCatalog", "PriceCatalog", "catalog_version", "default_catalog"]

#: Environment variable: ``off`` (no cache file) or the folder to keep the cache file in.
CACHE_ENV = "SESSIONTREE_PRICE_CACHE"

#: Version of the cache file's layout: part of its name, so a new layout starts a new file.
_LAYOUT = 1

#: A priced shape: provider ("" for none), model, input (uncached), output, cache read,
#: cache write, day (Unix days, UTC), 1-hour cache write.
PriceKey = tuple[str, str, int, int, int, int, int, int]


class PriceCatalog(Protocol):
    """Prices a call from its tokens; :class:`GenaiPricesCatalog` is the default."""

    #: What the prices come from, for reports (``"genai-prices 0.2.3"``).
    name: str

    def price(self, provider: str | None, model: str | None, input: int, output: int, cache_read: int,
              cache_write: int, at_ms: int) -> int | None:
        """The cost of one call in nano-dollars, or ``None`` when the model is unknown.
        A catalogue that knows 1-hour cache writes also takes ``cache_write_1h=`` (the
        part of ``cache_write`` written to the 1-hour cache); it is passed only when
        non-zero, so a catalogue without it prices every write at the 5-minute rate."""
        ...


def catalog_version() -> str | None:
    """The installed ``genai-prices`` version, read from its ``*.dist-info`` folder name
    beside the package without importing it or :mod:`importlib.metadata` (each costs
    tens of milliseconds at start-up); in another layout, from :mod:`importlib.metadata`;
    ``None`` when it is not installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("genai_prices")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin))
        try:
            names = os.listdir(site)
        except OSError:
            names = []
        for name in names:
            stem, _, ext = name.rpartition(".")
            project, dash, version = stem.partition("-")
            if ext == "dist-info" and dash and project.lower().replace("-", "_") == "genai_prices":
                return version
    try:
        from importlib.metadata import version as installed_version

        return installed_version("genai-prices")
    except Exception:  # not found, or metadata unreadable: no version to name or key by
        return None


class GenaiPricesCatalog:
    """Offline prices from the ``genai-prices`` package (its bundled snapshot: no network).

    ``input`` here is the uncached input: the catalogue's input count includes
    cache reads and writes, so they are added back before it is asked. Answers are
    kept per distinct call shape and day, in memory and in the cache file (module
    docstring); ``genai_prices`` is imported only to price a shape neither holds.

    Args:
        cache_dir: the folder of the cache file; ``None``: ``$SESSIONTREE_PRICE_CACHE``,
            else the user's cache folder (platformdirs); ``""``: no cache file.
    """

    def __init__(self, cache_dir: str | None = None) -> None:
        version = catalog_version()
        self.name = f"genai-prices {version}" if version else "genai-prices"
        self._cache: dict[PriceKey, int | None] = {}
        self._pending: dict[PriceKey, int | None] = {}
        self._file = _cache_file(cache_dir, version)
        self._loaded = False
        self._reader: sqlite3.Connection | None = None
        self._asked = 0

    def price(self, provider: str | None, model: str | None, input: int, output: int, cache_read: int,
              cache_write: int, at_ms: int, cache_write_1h: int = 0) -> int | None:
        """See :meth:`PriceCatalog.price`. The request time picks historical prices.
        ``cache_write_1h`` (a part of ``cache_write``) is priced at the catalogue's
        1-hour write rate (genai-prices ``cache_write_1h_mtok``; Anthropic: 2x the base
        input price, where a 5-minute write is 1.25x: docs/usage.md, "Claude Code")."""
        if not model:
            return None
        key: PriceKey = (provider or "", model, input, output, cache_read, cache_write, at_ms // 86_400_000,
                         cache_write_1h)
        if key in self._cache:
            return self._cache[key]
        if self._file is not None and not self._loaded:
            # A few shapes (a status line) are looked up one by one; a report of many loads
            # the whole file at once, which is cheaper from the 64th shape on.
            self._asked += 1
            if self._asked > _ONE_BY_ONE:
                self._load()
                if key in self._cache:
                    return self._cache[key]
            else:
                found, nanos = self._lookup(key)
                if found:
                    self._cache[key] = nanos
                    return nanos
        result = _catalog_price(key)
        self._cache[key] = self._pending[key] = result
        if len(self._pending) >= 5000:  # a long run (the viewer, sync --watch) keeps its answers too
            self.flush()
        return result

    def flush(self) -> None:
        """Write the answers worked out since the last flush to the cache file (best effort:
        a failure leaves them in memory only)."""
        pending, self._pending = self._pending, {}
        if not pending or self._file is None:
            return
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        try:
            os.makedirs(os.path.dirname(self._file), exist_ok=True)
            conn = sqlite3.connect(self._file, timeout=2.0, isolation_level=None)
            try:
                conn.execute(_CREATE)
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT OR REPLACE INTO price VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                 [(*key, nanos) for key, nanos in pending.items()])
                conn.execute("COMMIT")
            finally:
                conn.close()
        except (OSError, sqlite3.Error):
            pass  # best effort (module docstring)

    def _connect(self) -> sqlite3.Connection | None:
        """The cache file opened read-only, kept open for the lookups; ``None`` without one."""
        if self._reader is None and self._file is not None and os.path.exists(self._file):
            try:
                # Any thread may price (the viewer's worker threads): SQLite serialises the reads.
                self._reader = sqlite3.connect(f"file:{self._file}?mode=ro", uri=True, timeout=2.0,
                                               check_same_thread=False)
            except sqlite3.Error:
                self._file = None  # cannot be opened: no cache for this run
        return self._reader

    def _lookup(self, key: PriceKey) -> tuple[bool, int | None]:
        """``(found, nanos)`` of one shape in the cache file."""
        conn = self._connect()
        if conn is None:
            return False, None
        try:
            # fetchall, not fetchone: the statement ends, so no read lock outlives the lookup.
            rows = conn.execute(f"SELECT nanos FROM price WHERE {_KEY_WHERE}", key).fetchall()
        except sqlite3.Error:
            return False, None  # damaged or locked: priced again (and rewritten by the next flush)
        if not rows or not (rows[0][0] is None or isinstance(rows[0][0], int)):
            return False, None
        return True, rows[0][0]

    def _load(self) -> None:
        """Every shape of the cache file into memory."""
        self._loaded = True
        conn = self._connect()
        if conn is None:
            return
        try:
            rows = conn.execute("SELECT provider, model, input, output, cache_read, cache_write, day, "
                                "cache_write_1h, nanos FROM price").fetchall()
        except sqlite3.Error:
            return  # damaged or locked: priced again (and rewritten by the next flush)
        finally:
            self._reader = None
            conn.close()
        for row in rows:
            nanos = row[8]
            if isinstance(row[1], str) and (nanos is None or isinstance(nanos, int)):
                self._cache.setdefault(row[:8], nanos)


#: Shapes looked up one by one before the whole file is loaded.
_ONE_BY_ONE = 64
_KEY_WHERE = ("provider = ? AND model = ? AND input = ? AND output = ? AND cache_read = ? AND cache_write = ? "
              "AND day = ? AND cache_write_1h = ?")

_CREATE = ("CREATE TABLE IF NOT EXISTS price (provider TEXT NOT NULL, model TEXT NOT NULL, input INTEGER NOT NULL, "
           "output INTEGER NOT NULL, cache_read INTEGER NOT NULL, cache_write INTEGER NOT NULL, "
           "day INTEGER NOT NULL, cache_write_1h INTEGER NOT NULL, nanos INTEGER, "
           "PRIMARY KEY (provider, model, input, output, cache_read, cache_write, day, cache_write_1h)) "
           "WITHOUT ROWID")


def _cache_file(cache_dir: str | None, version: str | None) -> str | None:
    """The cache file's path, or ``None`` for none (turned off, or no version to key it by)."""
    if cache_dir is None:
        given = os.environ.get(CACHE_ENV, "").strip()
        if given.lower() == "off":
            return None
        if given:
            cache_dir = os.path.abspath(os.path.expanduser(given))
        else:
            import platformdirs

            cache_dir = platformdirs.user_cache_dir("sessiontree")
    if not cache_dir or not version or not all(c.isalnum() or c in ".+_-" for c in version):
        return None
    return os.path.join(cache_dir, f"prices-{_LAYOUT}-genai-prices-{version}.sqlite")


def _catalog_price(key: PriceKey) -> int | None:
    """Ask ``genai-prices`` (imported here, on the first shape the cache does not hold)."""
    import genai_prices

    provider, model, input, output, cache_read, cache_write, day, cache_write_1h = key
    usage = genai_prices.Usage(input_tokens=input + cache_read + cache_write, output_tokens=output,
                               cache_read_tokens=cache_read, cache_write_tokens=cache_write,
                               cache_write_1h_tokens=min(cache_write_1h, cache_write) or None)
    when = datetime.fromtimestamp(day * 86_400, UTC)
    for provider_id in ([provider, None] if provider else [None]):
        try:
            calc = genai_prices.calc_price(usage, model, provider_id=provider_id, genai_request_timestamp=when)
        except (LookupError, ValueError):
            continue
        return int((Decimal(calc.total_price) * NANOS_PER_USD).to_integral_value())
    return None


_DEFAULT: GenaiPricesCatalog | None = None


def default_catalog() -> GenaiPricesCatalog:
    """The process's one :class:`GenaiPricesCatalog` (its memory shared by every report; what
    it worked out is written to the cache file by each report, and at exit)."""
    global _DEFAULT
    if _DEFAULT is None:
        import atexit

        _DEFAULT = GenaiPricesCatalog()
        atexit.register(_DEFAULT.flush)
    return _DEFAULT
