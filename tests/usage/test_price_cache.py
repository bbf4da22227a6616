"""The price cache (usage/prices.py; docs/decisions/price-cache.md): a cached price equals
the catalogue's to the nano-dollar, a warm cache never imports ``genai_prices``, and a cache
that cannot be used only costs time.

Expected prices are Anthropic's published per-million rates (docs/usage.md, "Claude Code"):
claude-opus-4-5 $5 input, $25 output, $0.50 cache read, $6.25 5-minute and $10 1-hour cache
write; claude-sonnet-4-5 $3 / $15 / $0.30 / $3.75, and $6 / $22.50 / $0.60 / $7.50 for
every token of a call whose input (cache included) passes 200,000 tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sessiontree.usage.prices import CACHE_ENV, GenaiPricesCatalog, catalog_version

DAY = 1_765_000_000_000  # 2025-12-06

#: (provider, model, input, output, cache read, cache write, at ms, 1-hour write) -> nano-dollars.
HAND_PRICED = [
    # 1,000 x $5 + 100 x $25 + 1,000 x $0.50 + 2,000 x $6.25 (per million) = $0.0205
    (("anthropic", "claude-opus-4-5", 1000, 100, 1000, 2000, DAY, 0), 20_500_000),
    # 1,000 x $5 + 1,000 x $6.25 + 1,000 x $10 = $0.02125 (half the writes to the 1-hour cache)
    (("anthropic", "claude-opus-4-5", 1000, 0, 0, 2000, DAY, 1000), 21_250_000),
    # input 150,000 + cache read 100,000 = 250,000 > 200,000: 150,000 x $6 + 100,000 x $0.60 + 1,000 x $22.50
    # = 0.9 + 0.06 + 0.0225 = $0.9825
    (("anthropic", "claude-sonnet-4-5", 150_000, 1000, 100_000, 0, DAY, 0), 982_500_000),
    # the same under the threshold: 50,000 x $3 + 100,000 x $0.30 + 1,000 x $15 = 0.15 + 0.03 + 0.015 = $0.195
    (("anthropic", "claude-sonnet-4-5", 50_000, 1000, 100_000, 0, DAY, 0), 195_000_000),
    # no provider given: the catalogue finds the model by name alone
    ((None, "claude-opus-4-5", 1000, 100, 1000, 2000, DAY, 0), 20_500_000),
    (("nobody", "no-such-model-xyz", 1, 1, 0, 0, DAY, 0), None),
]


def _price(catalog: GenaiPricesCatalog, key: tuple) -> int | None:
    *head, hour = key
    return catalog.price(*head, **({"cache_write_1h": hour} if hour else {}))


def test_the_version_is_read_without_importing_the_catalogue():
    from importlib.metadata import version

    assert catalog_version() == version("genai-prices")
    assert GenaiPricesCatalog(cache_dir="").name == f"genai-prices {version('genai-prices')}"


@pytest.mark.parametrize(("key", "expected"), HAND_PRICED)
def test_cold_and_warm_prices_equal_the_published_rates(tmp_path, key, expected):
    cold = GenaiPricesCatalog(cache_dir=str(tmp_path))
    assert _price(cold, key) == expected
    cold.flush()
    assert len(os.listdir(tmp_path)) == 1
    warm = GenaiPricesCatalog(cache_dir=str(tmp_path))
    warm._load()
    assert len(warm._cache) == 1  # the answer comes from the file, not from the catalogue
    assert _price(warm, key) == expected


def test_a_warm_cache_does_not_import_the_catalogue(tmp_path):
    cold = GenaiPricesCatalog(cache_dir=str(tmp_path))
    prices = [_price(cold, key) for key, _ in HAND_PRICED]
    cold.flush()
    probe = ("import json, sys\nfrom sessiontree.usage.prices import GenaiPricesCatalog\n"
             "c = GenaiPricesCatalog(cache_dir=sys.argv[1])\n"
             "out = [c.price(*k[:7], **({'cache_write_1h': k[7]} if k[7] else {})) for k in json.loads(sys.argv[2])]\n"
             "print(json.dumps([out, 'genai_prices' in sys.modules, 'pydantic' in sys.modules]))")
    keys = json.dumps([key for key, _ in HAND_PRICED])
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path), keys], capture_output=True, text=True,
                          check=True)
    out, imported, pydantic = json.loads(done.stdout)
    assert out == prices == [expected for _, expected in HAND_PRICED]
    assert imported is False and pydantic is False


def test_a_new_shape_is_priced_and_added(tmp_path):
    first = GenaiPricesCatalog(cache_dir=str(tmp_path))
    assert _price(first, HAND_PRICED[0][0]) == HAND_PRICED[0][1]
    first.flush()
    second = GenaiPricesCatalog(cache_dir=str(tmp_path))
    assert _price(second, HAND_PRICED[2][0]) == HAND_PRICED[2][1]  # a miss: asks the catalogue
    second.flush()
    third = GenaiPricesCatalog(cache_dir=str(tmp_path))
    third._load()
    assert len(third._cache) == 2


def test_many_shapes_are_read_from_the_file_at_once(tmp_path, monkeypatch):
    # Past the first 64 shapes looked up one by one, the whole file is loaded.
    shapes = [("anthropic", "claude-opus-4-5", 1000 + i, 100, 1000, 2000, DAY, 0) for i in range(100)]
    cold = GenaiPricesCatalog(cache_dir=str(tmp_path))
    expected = [_price(cold, key) for key in shapes]
    cold.flush()
    # one more input token costs $5 per million = 5,000 nano-dollars
    assert expected == [20_500_000 + 5_000 * i for i in range(100)]
    import sessiontree.usage.prices as prices

    def refuse(key):
        raise AssertionError(f"asked the catalogue for {key}")

    monkeypatch.setattr(prices, "_catalog_price", refuse)
    warm = GenaiPricesCatalog(cache_dir=str(tmp_path))
    assert [_price(warm, key) for key in shapes] == expected
    assert warm._loaded


def test_a_damaged_or_unwritable_cache_only_costs_time(tmp_path):
    GenaiPricesCatalog(cache_dir=str(tmp_path)).flush()  # nothing pending: no file
    assert os.listdir(tmp_path) == []
    name = tmp_path / f"prices-1-genai-prices-{catalog_version()}.sqlite"
    name.write_bytes(b"not a database" * 100)
    damaged = GenaiPricesCatalog(cache_dir=str(tmp_path))
    assert _price(damaged, HAND_PRICED[0][0]) == HAND_PRICED[0][1]
    damaged.flush()  # fails quietly
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    unwritable = GenaiPricesCatalog(cache_dir=str(blocked / "sub"))
    assert _price(unwritable, HAND_PRICED[1][0]) == HAND_PRICED[1][1]
    unwritable.flush()


def test_the_cache_folder_and_off(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "off")
    off = GenaiPricesCatalog()
    assert _price(off, HAND_PRICED[0][0]) == HAND_PRICED[0][1]
    off.flush()
    assert off._file is None
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "prices"))
    kept = GenaiPricesCatalog()
    _price(kept, HAND_PRICED[0][0])
    kept.flush()
    assert os.listdir(tmp_path / "prices") == [f"prices-1-genai-prices-{catalog_version()}.sqlite"]
    monkeypatch.delenv(CACHE_ENV)
    default = GenaiPricesCatalog()
    assert default._file is not None and default._file.startswith(os.environ["XDG_CACHE_HOME"])


def test_any_thread_reads_the_cache(tmp_path, monkeypatch):
    # The viewer prices in its worker threads: the file opened by one thread serves the others.
    cold = GenaiPricesCatalog(cache_dir=str(tmp_path))
    expected = [_price(cold, key) for key, _ in HAND_PRICED]
    cold.flush()
    import threading

    import sessiontree.usage.prices as prices

    def refuse(key):
        raise AssertionError(f"asked the catalogue for {key}")

    monkeypatch.setattr(prices, "_catalog_price", refuse)
    warm = GenaiPricesCatalog(cache_dir=str(tmp_path))
    assert _price(warm, HAND_PRICED[0][0]) == expected[0]  # opens the file in this thread
    out: list[int | None] = []
    worker = threading.Thread(target=lambda: out.extend(_price(warm, key) for key, _ in HAND_PRICED))
    worker.start()
    worker.join()
    assert out == expected


def test_the_version_in_another_layout(monkeypatch):
    # No dist-info folder beside the package (a zip, a vendored copy): importlib.metadata answers.
    import importlib.metadata

    monkeypatch.setattr(os, "listdir", lambda path: [])
    assert catalog_version() == importlib.metadata.version("genai-prices")
