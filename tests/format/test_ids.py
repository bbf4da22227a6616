"""Session and entry ids (docs/rules/format.md B, docs/rules/decisions.md D-7)."""

from __future__ import annotations

import os
import re
import time

import pytest

from sessiontree.errors import InvalidSessionIdError
from sessiontree.format.ids import (
    derived_entry_id,
    is_valid_session_id,
    new_entry_id,
    new_session_id,
    session_id_hash,
    validate_session_id,
)

UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
B5_MESSAGE = ("Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', "
              "and start and end with an alphanumeric character")


@pytest.mark.parametrize("value", ["abc-123_def.456", "x", "A1", "0", "a.b", "a--b", "Z9_z"])
def test_accepted_session_ids(value: str) -> None:
    assert is_valid_session_id(value)
    assert validate_session_id(value) == value


@pytest.mark.parametrize(
    "value",
    ["", "-abc", "abc-", "_abc", "abc_", ".abc", "abc.", "abc/def", "abc\\def", "abc def",
     "abc\n", "\nabc", "é", "aéb", "a\u0660", "ab\x00", "a:b", None, 5, ["abc"]],
)
def test_rejected_session_ids(value: object) -> None:
    # B.6, plus B.7: a trailing newline and non-ASCII letters/digits are rejected.
    assert not is_valid_session_id(value)
    with pytest.raises(InvalidSessionIdError) as info:
        validate_session_id(value)
    assert str(info.value) == B5_MESSAGE
    assert isinstance(info.value, ValueError)


def test_new_session_id_is_uuid7_with_current_time() -> None:
    before = time.time_ns() // 1_000_000
    value = new_session_id()
    after = time.time_ns() // 1_000_000
    assert UUID7.fullmatch(value)
    ms = int(value.replace("-", "")[:12], 16)
    assert before <= ms <= after
    assert is_valid_session_id(value)


def test_new_session_ids_are_distinct() -> None:
    values = {new_session_id() for _ in range(2000)}
    assert len(values) == 2000


def test_new_entry_id_is_8_hex_and_avoids_existing() -> None:
    existing: set[str] = set()
    for _ in range(2000):
        value = new_entry_id(existing)
        assert re.fullmatch(r"[0-9a-f]{8}", value)
        assert value not in existing
        existing.add(value)


def test_new_entry_id_falls_back_to_full_uuid_after_100_collisions() -> None:
    # B.1: every 8-hex candidate collides, so a 36-character UUID is used.
    class Every8Hex:
        calls = 0

        def __contains__(self, item: object) -> bool:
            Every8Hex.calls += 1
            return isinstance(item, str) and len(item) == 8

    value = new_entry_id(Every8Hex())
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", value)
    assert Every8Hex.calls == 100


def test_derived_entry_id_is_deterministic_and_avoids_existing() -> None:
    first = derived_entry_id("sess:1", set())
    assert re.fullmatch(r"[0-9a-f]{8}", first)
    assert derived_entry_id("sess:1", set()) == first
    other = derived_entry_id("sess:1", {first})
    assert other != first and re.fullmatch(r"[0-9a-f]{8}", other)
    assert derived_entry_id("sess:2", set()) != first


def test_session_id_hash_is_sha256_prefix() -> None:
    # D-7: first 16 hex digits of SHA-256 over the UTF-8 id (FIPS 180-2 test vector for "abc").
    assert session_id_hash("abc") == "ba7816bf8f01cfea"


def test_shortest_unique_prefixes_like_git():
    from sessiontree.format.ids import shortest_unique_prefixes

    ids = ["019cadb4-6e80-7a3c", "019cadb4-6e81-0000", "019cadc9-1f40-7b2e", "ab", "abc"]
    assert shortest_unique_prefixes(ids) == {
        "019cadb4-6e80-7a3c": "019cadb4-6e80",   # shares "019cadb4-6e8" (12) with its neighbour: 13 chars
        "019cadb4-6e81-0000": "019cadb4-6e81",
        "019cadc9-1f40-7b2e": "019cadc9",        # unique after 7 characters: the minimum 8
        "ab": "ab",                              # shorter than the minimum: whole
        "abc": "abc",
    }
    assert shortest_unique_prefixes(["x" * 36], minimum=8) == {"x" * 36: "x" * 8}
    assert shortest_unique_prefixes([]) == {}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_new_entry_id_forked_child_draws_its_own_candidates() -> None:
    # Candidates are drawn from os.urandom in batches: a child forked with part of a
    # batch unused must not hand out the parent's next ids.
    new_entry_id(set())  # the parent holds a batch with 255 candidates left
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read)
        os.write(write, " ".join(new_entry_id(set()) for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        child = handle.read().decode().split()
    os.waitpid(pid, 0)
    parent = [new_entry_id(set()) for _ in range(8)]
    assert len(child) == 8
    assert child != parent


def test_new_entry_id_draws_across_batches_stay_distinct() -> None:
    # 1,000 draws span four batches of 256: every one is 8 hex and unused (B.1).
    drawn = [new_entry_id(set()) for _ in range(1000)]
    assert all(re.fullmatch(r"[0-9a-f]{8}", value) for value in drawn)
    assert len(set(drawn)) >= 999  # 32 random bits: a repeat among 1,000 has odds ~1e-4
