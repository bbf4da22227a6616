"""The scanner's fast path (candidates first, plugins only where a candidate is) finds what
the reference path (every gated plugin on every string) finds: docs/secrets.md, "Speed";
issue 42, target 3.

The generated strings are synthetic by necessity (the real corpus holds no secret): fake keys
of every plugin's and own rule's family, built by concatenation, in noise made of the
characters the candidate conditions look at (quotes, colons, ``=``, dots, newlines, the
keyword letters in any case, the three letters case-blind matching folds). The real corpus
is compared string by string in :func:`test_fast_equals_reference_on_every_string_of_the_real_corpus`.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import foreign_files, needs_shared
from sessiontree.core import secrets, secretscan
from sessiontree.core.secrets import scan_text, scan_text_reference
from sessiontree.format.foreign import map_foreign
from test_secrets import HEX40, R32, R40, SHAPES

HEX64 = HEX40 + HEX40[:24]
LOWER64 = (R32 * 2).lower()

#: Fragments of every family the plugins and own rules know, beyond tests/test_secrets.py's SHAPES
#: (the assignment-style plugins, Discord, Mailchimp, npm's .npmrc line, the keyword plugin's forms).
FAMILIES = [text for _, text, _ in SHAPES] + [
    f"cloudant_api_key = '{HEX64}'",
    f"cl-pw: {LOWER64[:24]}",
    f"https://acct:{HEX64}@acct.cloudant.com",
    f"ibm_cloud_iam_key={R32}{R32[:12]}",
    f"IBM-IAM-PASSWORD: \"{R32}{R32[:12]}\"",
    f"cos_hmac_secret_access_key = {HEX40}{HEX40[:8]}",
    f"softlayer_api_key  {LOWER64}",
    f"https://api.softlayer.com/soap/v3.1/{LOWER64}",
    "MTk4NjIyNDgzNDcxOTI1MjQ4" + ".Cl2FMQ." + "ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    R32.lower() + "-us12",
    "//registry.npmjs.org/:_authToken=" + "0123abcd-4567-89ef-0123-456789abcdef",
    f"private_key '{R32}';",
    f"'{R32[:16]}' == db_password",
    f"secret_key := \"{R40}\"",
    "AC" + "0123456789abcdef" * 2,
    "Bearer " + R32 + R32,
    f"AWS_SECRET_ACCESS_KEY=\"{R40}\"",
    "ASIA" + "Q3EGRH5NZ7MK2XYT",
    "glptt-" + R40,
    "user: Pa55w0rd!x",
]

NOISE = st.text(alphabet=st.sampled_from(list("ab KEYkeypassPWDsecretTOKENawsAC\"'`:=;!.-_/@\n\t\u017f\u0131\u0130\u212a0123456789")),
                max_size=40)


def _mutate(fragment: str, how: int) -> str:
    if how == 1:
        return fragment.upper()
    if how == 2:
        return fragment.lower()
    if how == 3:
        return fragment.replace("s", "\u017f").replace("i", "\u0131")
    if how == 4:
        return fragment[: len(fragment) // 2]
    return fragment


@st.composite
def session_strings(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        parts.append(draw(NOISE))
        fragment = draw(st.sampled_from(FAMILIES))
        parts.append(_mutate(fragment, draw(st.integers(0, 6))))
    parts.append(draw(NOISE))
    return draw(st.sampled_from(["", " ", "\n", "\"", "'"])).join(parts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_strings())
def test_fast_path_finds_what_the_reference_finds(text):
    assert secretscan._SET is not None  # the RE2 pass is installed (a dependency)
    assert scan_text(text) == scan_text_reference(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_strings())
def test_without_re2_the_fast_path_still_finds_what_the_reference_finds(text):
    kept = secretscan._SET
    secretscan._SET = None  # as where google-re2 cannot be imported
    try:
        assert scan_text(text) == scan_text_reference(text)
    finally:
        secretscan._SET = kept


def test_a_lone_surrogate_is_scanned_without_the_re2_pass():
    """UTF-8 cannot carry a lone surrogate (a JSON ``\\ud800`` escape decodes to one): the
    string is scanned by the candidate conditions alone, with the same findings."""
    text = "\ud800 token ghp" + "_" + R32 + "abcd"
    assert scan_text(text) == scan_text_reference(text) != []


@pytest.mark.parametrize("kind,text", [(kind, text) for kind, text, _ in SHAPES])
def test_each_seeded_shape_is_found_by_the_fast_path_as_by_the_reference(kind, text):
    for how in range(5):
        variant = _mutate(text, how)
        assert scan_text(variant) == scan_text_reference(variant), (kind, how)
    assert scan_text(text), kind  # the shape itself is a finding on both paths


def test_a_string_without_any_candidate_runs_no_plugin(monkeypatch):
    """Prose with quotes, dots and colons (what the old cheap gates let through to the
    entropy, Discord and Telegram plugins) holds no candidate: no plugin runs at all."""
    def boom(*args, **kwargs):
        raise AssertionError("a plugin ran on a string without a candidate")

    for plugin, _ in secrets.PLUGIN_KINDS:
        monkeypatch.setattr(plugin, "analyze_string", boom)
    text = 'He said "look at src/main.py": it fails at 12:30. Then \'run it\' again: done.'
    assert scan_text(text) == []


REAL_FILES = foreign_files("claude-code") + foreign_files("codex") + foreign_files("gemini")


@needs_shared
def test_fast_equals_reference_on_every_string_of_the_real_corpus():
    """Every scanned string of ../shared/corpus (mapped text, header, verbatim records):
    the same hits on both paths."""
    compared = 0
    for path in REAL_FILES:
        mapped = map_foreign(path.read_bytes(), str(path))
        if mapped is None:
            continue
        fields = [text for _, text in secrets.iter_text_fields(dict(mapped.header))]
        for entry in mapped.entries:
            fields += [text for _, text in secrets.iter_text_fields(entry)]
            fields += [text for _, text in secrets.iter_raw_fields(entry)]
        for text in fields:
            assert scan_text(text) == scan_text_reference(text), (path.name, text[:80])
            compared += 1
    assert compared > 10_000


def test_a_redacted_export_of_a_clean_session_shares_its_entries_instead_of_copying_them():
    """Redaction of a session without secrets costs its scan, not a deep copy of every entry
    (issue 42: a redacted export within 1.5x of the plain one); a session with a secret still
    gets new entries where it shows, and the read session is never changed."""
    from builders import header, user_block_entry
    from sessiontree.core.secrets import redact_parsed
    from sessiontree.format.codec import ParsedSession

    clean = [user_block_entry("e1", None, "hello: nothing secret here"), user_block_entry("e2", "e1", "bye")]
    def session(entries):
        return ParsedSession(header=header("019cadb4-6e80-7a3c-9b1d-0000000000f1"), entries=entries,
                             raw=[None] * len(entries), header_raw=b"{}", source_version=4)

    parsed = session(clean)
    copy, redactor = redact_parsed(parsed)
    assert redactor.secrets == 0
    assert all(a is b for a, b in zip(copy.entries, clean, strict=True))
    leaky = [*clean, user_block_entry("e3", "e2", "token ghp" + "_" + R32 + "abcd")]
    before = [dict(e) for e in leaky]
    copy, redactor = redact_parsed(session(leaky))
    assert redactor.secrets == 1
    assert all(a is not b for a, b in zip(copy.entries, leaky, strict=True))  # the secret is replaced everywhere
    assert "ghp_" not in str(copy.entries[2]) and leaky == before


# --------------------------------------------------------------------------- round five (issue 42, target 3)
#
# The session-level fast path (one pass per string, paths only for strings with a secret, a
# record's string equal to a mapped one taking its hits, keyword and entropy plugins on the
# lines that can hold their match) against the plain path: detect-secrets' plugins on every
# string (scan_entries_reference).

def _keyword_plugin():
    from detect_secrets.plugins.keyword import KeywordDetector

    return next(plugin for plugin, _ in secrets.PLUGIN_KINDS if isinstance(plugin, KeywordDetector))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_strings())
def test_keyword_values_are_what_detect_secrets_analyze_string_yields(text):
    """The keyword plugin's four config regexes tried only where a denylist word can start
    give what its own ``analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP)`` gives, line by line."""
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP

    plugin = _keyword_plugin()
    for line in text.splitlines():
        assert list(secretscan._keyword_values(plugin, line)) == list(
            plugin.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP)), line


def test_keyword_values_find_a_match_that_starts_before_its_keyword():
    """``database_password: ...`` matches from ``database_``, nine characters before ``pass``;
    of two matches on a line the leftmost is the one reported, as ``search`` reports it."""
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP

    plugin = _keyword_plugin()
    assert list(secretscan._keyword_values(plugin, "DATABASE_PASSWORD: Hunter2x99")) == ["Hunter2x99"]
    assert list(secretscan._keyword_values(plugin, "db_pass = one1two2")) == ["one1two2"]
    line = "x api_key: first1val and secret: second2val"
    values = list(secretscan._keyword_values(plugin, line))
    assert values == list(plugin.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP))
    assert values[0].startswith("first1val")  # the leftmost match, from api_key


def test_a_quoted_base64_run_holding_a_backslash_is_found_by_the_fast_path():
    """The base64 plugin's charset holds ``\\``: a quoted run with one is a candidate (the
    candidate pattern once left it out, and only the reference path found it)."""
    text = 'x = "' + R32[:22] + "\\" + R32[22:] + R40[:10] + '"'
    assert scan_text(text) == scan_text_reference(text) != []


def test_entropy_matches_on_other_lines_than_the_quoted_run_are_kept():
    """Several lines, a quoted run on two of them, short quoted strings on others: the entropy
    plugins read only the lines with a quoted run, and find what they find in the whole text."""
    text = "\n".join(['a = "short"', 'key = "' + R40 + '"', "'x' 'y'", "plain", "t = '" + HEX40 + "'  'z'"])
    assert scan_text(text) == scan_text_reference(text) != []


def _seeded_sessions() -> list[tuple[dict | None, list]]:
    """The seeded secrets corpus: tests/test_secrets.py's session (every shape in every field
    kind), one per shape, and a Claude Code session whose records and mapped text hold keys."""
    from builders import header
    from foreign_support import CC_PROJECT, CC_SID, claude_records, jl
    from test_secrets import ALL_TEXT, SHAPES, _session_entries

    sessions: list[tuple[dict | None, list]] = [(header("019cae00-0000-7000-8000-00000000a001"),
                                                _session_entries(ALL_TEXT))]
    sessions += [(None, _session_entries(text)) for _, text, _ in SHAPES]
    records = claude_records()
    leaky = [{**record, "note": f"token {text}"} if i % 2 else record
             for i, (record, (_, text, _)) in enumerate(zip(records, SHAPES * 4, strict=False))]
    mapped = map_foreign(jl(leaky), f"/h/.claude/projects/{CC_PROJECT}/{CC_SID}.jsonl")
    assert mapped is not None and any("foreign" in entry for entry in mapped.entries)
    sessions.append((mapped.header, mapped.entries))
    return sessions


def test_scan_entries_equals_the_plain_path_on_the_seeded_secrets_corpus():
    compared = 0
    for header_, entries in _seeded_sessions():
        fast = [f.as_dict() for f in secrets.scan_entries(entries, header_)]
        plain = [f.as_dict() for f in secrets.scan_entries_reference(entries, header_)]
        assert fast == plain
        compared += len(fast)
    assert compared > 300  # every shape, in every field kind


@pytest.mark.slow
@needs_shared
def test_scan_entries_equals_the_plain_path_on_every_session_of_the_real_corpus():
    """Every file of ../shared/corpus (pi sessions read as stored, the other agents' mapped
    with their records): the same findings, in the same order, on both paths."""
    from corpus import shared_files
    from sessiontree.format.codec import read_session_file

    sessions = [(parsed.header, parsed.entries) for parsed in map(read_session_file, shared_files())]
    for path in REAL_FILES:
        mapped = map_foreign(path.read_bytes(), str(path))
        if mapped is not None:
            sessions.append((mapped.header, mapped.entries))
    assert len(sessions) > 20
    for header_, entries in sessions:
        assert secrets.scan_entries(entries, header_) == secrets.scan_entries_reference(entries, header_)


_KEYS = st.sampled_from(["", "foreign", "type", "image", "data", "message", "content", "text", "id", "raw", "agent",
                         "arguments", "replacement", "signature", "uuid", "command"])
_VALUES = st.recursive(st.one_of(st.text(max_size=5), st.integers(), st.none(), st.just("image")),
                       lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
                       max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_the_pathless_walks_give_the_strings_of_the_named_walks_in_their_order(entry):
    """The session scan pairs the strings gathered without paths with the walk that names
    them, position by position: both walks must give the same strings in the same order
    (``foreign`` at the top or under a ``""`` key, image ``data``, structural keys)."""
    from sessiontree.core import secretfields

    texts: list[str] = []
    secretfields._collect(entry, True, True, texts)
    assert texts == [text for _, text in secrets.iter_text_fields(entry)]
    raw: list[str] = []
    secretfields._collect_raw(entry, raw)
    assert raw == [text for _, text in secretfields._walk_raw(entry, "foreign.raw")]
