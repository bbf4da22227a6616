"""JSON encoding as the format needs it (docs/rules/format.md E.1, §2.6). Expected texts
are what JavaScript's ``JSON.stringify`` / ``Number.prototype.toString`` give,
worked out from the ECMAScript rules."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.format import jsonio
from sessiontree.format.jsonio import dumps, dumps_str, js_number, js_stringify, loads, utf16_len

# --------------------------------------------------------------------------- loads


def test_loads_lone_surrogate_escapes_from_bytes_and_text() -> None:
    assert loads(b'{"a":"x\\ud83d","\\udc00":1}') == {"a": "x\ud83d", "\udc00": 1}
    assert loads('["\\udfff"]') == ["\udfff"]


def test_loads_surrogate_pair_escape_is_one_character() -> None:
    assert loads(b'"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize("text", [b"NaN", b"[Infinity]", b"-Infinity", b'["\\ud800",NaN]', b'{"a":"\\ud800","b":Infinity}'])
def test_loads_rejects_non_json_constants(text: bytes) -> None:
    with pytest.raises(ValueError):
        loads(text)


@pytest.mark.parametrize("text", [b"", b"{", b'{"a":1}{"b":2}', b'{"a":1,}', b"{'a':1}", b'"\\ud800" x', b'{"a":"\\ud800"'])
def test_loads_rejects_invalid_json(text: bytes) -> None:
    with pytest.raises(ValueError):
        loads(text)


def test_loads_allows_json_whitespace_including_cr() -> None:
    assert loads(b' {"a":1}\r') == {"a": 1}


def test_loads_replaces_invalid_utf8() -> None:
    assert loads(b'"a\xffb"') == "a\ufffdb"


# --------------------------------------------------------------------------- dumps


def test_dumps_is_compact_with_raw_non_ascii_and_key_order() -> None:
    value = {"z": "é\u2028", "a": [1, 2.5, None, True], "m": {"y": 1, "b": 2}}
    assert dumps(value) == '{"z":"é\u2028","a":[1,2.5,null,true],"m":{"y":1,"b":2}}'.encode("utf-8")
    assert dumps_str(value) == '{"z":"é\u2028","a":[1,2.5,null,true],"m":{"y":1,"b":2}}'


def test_dumps_escapes_lone_surrogates_like_javascript() -> None:
    assert dumps({"k\udc00": "cut \ud83d", "n": 1}) == b'{"k\\udc00":"cut \\ud83d","n":1}'
    # a backslash right before a lone surrogate stays a backslash
    text = dumps({"k": "\\\ud800"})
    assert text == b'{"k":"\\\\\\ud800"}'
    assert loads(text) == {"k": "\\\ud800"}


def test_dumps_escapes_control_characters() -> None:
    assert dumps("\b\f\n\r\t\x01\x1f\"\\") == b'"\\b\\f\\n\\r\\t\\u0001\\u001f\\"\\\\"'


def test_dumps_rejects_non_json_values() -> None:
    with pytest.raises(ValueError):
        dumps({"a": object()})


# --------------------------------------------------------------------------- js_number


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"), (0.0, "0"), (-0.0, "0"), (1.0, "1"), (100.0, "100"), (-1.5, "-1.5"), (2.5, "2.5"),
        (0.1, "0.1"), (0.1 + 0.2, "0.30000000000000004"), (123456789012, "123456789012"),
        (1e15, "1000000000000000"), (1e20, "100000000000000000000"), (1.23e20, "123000000000000000000"),
        (1e21, "1e+21"), (1.5e21, "1.5e+21"), (-1e21, "-1e+21"), (1e300, "1e+300"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (1e-6, "0.000001"), (0.00001, "0.00001"), (1.2345e-5, "0.000012345"),
        (1e-7, "1e-7"), (-1e-7, "-1e-7"), (1.5e-7, "1.5e-7"), (5e-324, "5e-324"),
        (float("nan"), "null"), (float("inf"), "null"), (float("-inf"), "null"),
        # JS numbers are doubles: integers beyond 2**53 print as the double they round to
        (2**53, "9007199254740992"), (2**53 + 1, "9007199254740992"), (-(2**53 + 1), "-9007199254740992"),
        (10**21, "1e+21"), (2**64, "18446744073709552000"), (10**400, "null"),
    ],
)
def test_js_number(value: float, expected: str) -> None:
    assert js_number(value) == expected


# --------------------------------------------------------------------------- js_stringify


def test_js_stringify_reference_example() -> None:
    # docs/rules/format.md §2.6: integer-like keys first, JS number formatting.
    value = {"b": 1, "2": 2, "1": 3, "f": 1.0, "g": 1e21, "h": 1e-7}
    assert js_stringify(value) == '{"1":3,"2":2,"b":1,"f":1,"g":1e+21,"h":1e-7}'


def test_js_stringify_array_index_keys() -> None:
    # Array indexes are canonical integers 0 .. 2**32 - 2; "01" and 2**32 - 1 are plain strings.
    value = {"x": 1, "4294967295": 2, "01": 3, "4294967294": 4, "10": 5, "9": 6, "-1": 7, "0": 8}
    assert js_stringify(value) == '{"0":8,"9":6,"10":5,"4294967294":4,"x":1,"4294967295":2,"01":3,"-1":7}'
    assert js_stringify({"a": {"2": 1, "1": 2}}) == '{"a":{"1":2,"2":1}}'


def test_js_stringify_strings() -> None:
    text = "\b\f\n\r\t\x01\x1f\"\\\x7f\u2028é\ud83d\U0001f600"
    assert js_stringify(text) == '"\\b\\f\\n\\r\\t\\u0001\\u001f\\"\\\\\x7f\u2028é\\ud83d\U0001f600"'


def test_js_stringify_scalars_and_containers() -> None:
    assert js_stringify([None, True, False, "a", 1.0, [], {}, (1, 2), float("nan")]) == '[null,true,false,"a",1,[],{},[1,2],null]'
    assert js_stringify({"k": [{"a": "b"}], "n": 2.5}) == '{"k":[{"a":"b"}],"n":2.5}'


def test_js_stringify_deep_nesting_does_not_recurse() -> None:
    depth = 100_000
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    assert js_stringify(value) == "[" * depth + "]" * depth


def test_js_stringify_rejects_non_json() -> None:
    with pytest.raises(ValueError):
        js_stringify({"a": {1, 2}})


# --------------------------------------------------------------------------- utf16_len


@pytest.mark.parametrize(("text", "expected"), [("", 0), ("a", 1), ("é", 1), ("\U0001f600", 2), ("\ud83d", 1),
                                                ("\U0001f600" * 8001, 16002)])
def test_utf16_len(text: str, expected: int) -> None:
    assert utf16_len(text) == expected


def test_js_number_matches_float_value() -> None:
    for value in (3.14159, 6.02214076e23, 1.602e-19, 299792458.0):
        assert float(js_number(value)) == value
        assert not math.isnan(float(js_number(value)))


def test_non_finite_floats_are_written_as_null_like_json_stringify() -> None:
    # JSON.stringify(NaN) and JSON.stringify(Infinity) are "null" (docs/rules/format.md §2.6 item 4),
    # on the fast path and on the fallback that lone surrogates take.
    from sessiontree.format.jsonio import dumps

    assert dumps({"a": float("nan"), "b": [float("inf"), -float("inf")]}) == b'{"a":null,"b":[null,null]}'
    assert dumps({"a": float("nan"), "s": "\ud800"}) == b'{"a":null,"s":"\\ud800"}'


# --------------------------------------------------------------------------- dumps: JavaScript bytes


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, 9e-6, 5e-6, 1e-7, 1e16, 1e21, 1.5e300, 5e-324, 0.1, 123.0,
                                   2**53 + 1, 2**63 - 1, 2**64 - 1, 2**64, 10**400, -(10**30)])
def test_dumps_numbers_use_js_number(value: float) -> None:
    # The fast path and the fallback (a lone surrogate beside it forces js_stringify) agree.
    assert dumps(value) == js_number(value).encode()
    assert dumps([value, {"n": value}]) == f'[{js_number(value)},{{"n":{js_number(value)}}}]'.encode()
    assert dumps([value, "\ud800"]) == f'[{js_number(value)},"\\ud800"]'.encode()


def test_dumps_leaves_number_like_string_content_alone() -> None:
    value = {"a": ":1.0,", "b": "\\", "c": '\\":9e-6}', "d": ",1e+16]", "e": 1.0}
    assert dumps(value) == b'{"a":":1.0,","b":"\\\\","c":"\\\\\\":9e-6}","d":",1e+16]","e":1}'


def test_dumps_orders_array_index_keys_at_every_level() -> None:
    value = {"b": [{"2": 1, "1": 2}], "1": {"x": 1}, "a": {"10": 1, "9": 2, "09": 3}}
    assert dumps(value) == b'{"1":{"x":1},"b":[{"1":2,"2":1}],"a":{"9":2,"10":1,"09":3}}'
    # Already in JavaScript order: the same bytes as orjson.
    assert dumps({"0": 1, "1": 2, "a": 3}) == b'{"0":1,"1":2,"a":3}'


def test_dumps_joins_adjacent_surrogate_code_points() -> None:
    # A JavaScript string cannot tell "\ud83d\ude00" from U+1F600: JSON.stringify writes the character.
    assert dumps("\ud83d\ude00|\ude00\ud83d") == '"\U0001f600|\\ude00\\ud83d"'.encode()


def test_dumps_non_string_keys_as_json_dumps_names_them() -> None:
    assert dumps({1: 1.0, None: 2, False: 3}) == b'{"1":1,"null":2,"false":3}'


_numbers = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 123.0, 1e15, 1e16, 1e21, 1e-5, 9.99e-6, 1e-7, 0.000009, 2**53 + 1, -(2**53) - 1]))
_keys = st.one_of(st.text(max_size=4), st.sampled_from(["0", "1", "10", "01", "4294967294", "4294967295", "٣", "a1"]))
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), _numbers, st.text(max_size=8),
              st.sampled_from(["a:1.0,", ",1e5]", '"7":', "x 12345678901234567"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_dumps_of_tricky_numbers_and_keys_is_js_stringify(value) -> None:
    """dumps (orjson, then the number/key fix-ups) gives js_stringify's bytes (the exact
    serialiser) for integers beyond 2**53, integral, tiny and huge floats, array-index
    keys, and strings that look like number tokens."""
    assert jsonio.dumps(value) == jsonio.js_stringify(value).encode("utf-8")


def test_both_parsers_read_big_integers_alike():
    """orjson reads an integer literal beyond 64 bits as a float; the fallback parser
    (taken for text orjson refuses, e.g. a lone surrogate escape) must give the same
    value, not a Python int JavaScript could never hold."""
    text = '{"s":"\\ud800","big":18446744073709551616,"top":18446744073709551615,"low":-9223372036854775809}'
    value = jsonio.loads(text)
    assert value["s"] == "\ud800"
    assert value["big"] == 2.0 ** 64 and isinstance(value["big"], float)
    assert value["top"] == 2 ** 64 - 1 and isinstance(value["top"], int)
    assert value["low"] == -(2.0 ** 63) and isinstance(value["low"], float)
    plain = jsonio.loads(text.replace('"\\ud800"', '"x"'))  # the orjson path
    assert [type(plain[k]) for k in ("big", "top", "low")] == [float, int, float]


def test_sorted_keys_sorts_every_object_by_code_point_and_keeps_lists_in_order():
    value = {"b": [{"z": 1, "a": 2}, 3], "a": {"é": None, "e": True}, "B": "x"}
    out = jsonio.sorted_keys(value)
    assert list(out) == ["B", "a", "b"]  # "B" (U+0042) < "a" < "b"
    assert list(out["a"]) == ["e", "é"] and list(out["b"][0]) == ["a", "z"] and out["b"][1] == 3
    assert out == value  # same content, only the order differs
    assert jsonio.dumps(out) == b'{"B":"x","a":{"e":true,"\xc3\xa9":null},"b":[{"a":2,"z":1},3]}'


def test_an_integer_beyond_a_double_is_infinity_not_an_error() -> None:
    # orjson refuses a number past 1.8e308; the standard parser's fallback read the integer
    # and then raised OverflowError converting it to float (a crash of sync's sniff, found by
    # fuzzing agent files). JavaScript reads it as Infinity; an integer past 64 bits is the
    # nearest double, as orjson reads 18446744073709551616.
    assert jsonio.loads('{"a": ' + "9" * 400 + "}") == {"a": float("inf")}
    assert jsonio.loads('{"a": -' + "9" * 400 + "}") == {"a": float("-inf")}
    assert jsonio.loads('{"a": 1e309, "b": 18446744073709551616}') == {"a": float("inf"), "b": 2.0**64}
