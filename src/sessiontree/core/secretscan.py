"""The secret scanner: the secrets one string holds (docs/secrets.md, "Rules" and "Speed").

The rules are ``detect-secrets``' plugins (their ``analyze_string``, never its file
scanner, never its network verification) and the named rules of :data:`OWN_RULES` for
shapes it misses. This is the only module that imports ``detect_secrets``. A rule runs on
a string only where one multi-pattern pass (an RE2 set, ``google-re2``) and its own
candidate condition find a candidate for it; the findings are those of every rule on
every string (:func:`scan_text_reference`). Which strings of a session are scanned is
:mod:`sessiontree.core.secretfields`; findings and redaction are
:mod:`sessiontree.core.secrets`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from detect_secrets.filters import heuristic
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
    HighEntropyStringsPlugin,
)
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import (
    CONFIG_DENYLIST_REGEX_TO_GROUP,
    KeywordDetector,
)
from detect_secrets.plugins.keyword import (
    PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX as _KEYWORD_PRECEDED,
)
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

__all__ = [
    "ENTROPY_MIN",
    "OWN_RULES",
    "PLUGIN_KINDS",
    "Hit",
    "scan_text",
    "scan_text_reference",
]

#: The detect-secrets plugins used, each with the kind its findings get. Left out:
#: ``PrivateKeyDetector`` (it reports the ``BEGIN`` marker, not the key: the own rule
#: ``private-key`` spans the whole block) and ``IPPublicDetector`` (addresses are not secrets).
PLUGIN_KINDS: tuple[tuple[BasePlugin, str], ...] = (
    (AWSKeyDetector(), "aws-access-key"),
    (AzureStorageKeyDetector(), "azure-storage-key"),
    (BasicAuthDetector(), "url-password"),
    (CloudantDetector(), "cloudant-credentials"),
    (DiscordBotTokenDetector(), "discord-bot-token"),
    (GitHubTokenDetector(), "github-token"),
    (GitLabTokenDetector(), "gitlab-token"),
    (IbmCloudIamDetector(), "ibm-cloud-iam-key"),
    (IbmCosHmacDetector(), "ibm-cos-hmac"),
    (JwtTokenDetector(), "jwt"),
    (MailchimpDetector(), "mailchimp-key"),
    (NpmDetector(), "npm-token"),
    (OpenAIDetector(), "openai-api-key"),
    (PypiTokenDetector(), "pypi-token"),
    (SendGridDetector(), "sendgrid-api-key"),
    (SlackDetector(), "slack-token"),
    (SoftlayerDetector(), "softlayer-credentials"),
    (SquareOAuthDetector(), "square-oauth-secret"),
    (StripeDetector(), "stripe-key"),
    (TelegramBotTokenDetector(), "telegram-bot-token"),
    (TwilioKeyDetector(), "twilio-key"),
    (Base64HighEntropyString(), "high-entropy-base64"),
    (HexHighEntropyString(), "high-entropy-hex"),
    (KeywordDetector(), "secret-assignment"),
)

#: Ids the agents' protocols give requests, messages, tool calls and responses
#: (``req_011C…``, ``msg_01…``, ``toolu_01…``, ``call_…``, ``resp_…``, ``rs_…``): never a
#: finding, in any field (docs/secrets.md).
_PROTOCOL_ID = re.compile(r"(?:req|msg|toolu|srvtoolu|call|resp|rs|fc|ws|ctc|ig)_[A-Za-z0-9]{8,}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

#: The shortest quoted string the entropy plugins report: shorter hex or base64 runs are
#: ids, short commit hashes and slugs (``"8dacfb4a2feb"``), not keys (docs/secrets.md).
ENTROPY_MIN = 20

# Plugins whose patterns capture only the token's prefix ("ghp", "glpat"): the whole match is the secret.
_WHOLE_MATCH = (GitHubTokenDetector, GitLabTokenDetector)

_ENV_NAME = r"[A-Z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)[A-Z0-9_]*"

#: Own rules, for shapes detect-secrets misses: ``(kind, pattern)``. The secret is
#: group ``secret`` when the pattern names one, else the whole match.
OWN_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic-api-key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai-api-key", re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}")),
    ("github-fine-grained-token", re.compile(r"github_pat_[A-Za-z0-9_]{22,}")),
    ("google-api-key", re.compile(r"AIza[0-9A-Za-z_\-]{35}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+")),
    ("private-key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\s:,.\-\\]*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?=[^A-Za-z0-9+/=\s:,.\-\\])|\Z)")),
    ("private-key", re.compile(r"PuTTY-User-Key-File-\d: [\s\S]*?(?:Private-MAC: [0-9a-fA-F]+|\Z)")),
    ("url-password", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/?#\s@\"']+:(?P<secret>[^@\s/\"']+)@")),
    ("bearer-token", re.compile(r"\b[Bb]earer\s+(?P<secret>[A-Za-z0-9._~+/\-]{20,}=*)")),
    ("env-secret", re.compile(
        r"(?:^|(?<=[\s;&|]))(?:export[ \t]+)?" + _ENV_NAME + r"[ \t]*=[ \t]*['\"]?"
        r"(?![A-Za-z_][A-Za-z0-9_]*[.(\[])(?P<secret>[^\s'\"$<{][^\s'\"]{7,})", re.MULTILINE)),
)

_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9\-]+:\d+\]")

@dataclass(frozen=True)
class Hit:
    """One secret inside one string: ``text[start:end]`` is the secret (never printed)."""

    start: int
    end: int
    kind: str


def _line_at(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1: (text.find("\n", end) + 1 or len(text) + 1) - 1]


_NOT_VALUES = frozenset({"undefined", "null", "none", "true", "false", "nil", "changeme", "password", "secret"})
_FILLER = re.compile(r"[xX*.<>_\-]+|<[^<>]*>|\$\{[^}]*\}|\{\{[^}]*\}\}")


_FILLER_RUN = re.compile(r"x{4,}|X{4,}|\*{3,}|0{8,}")


def _placeholder_like(secret: str) -> bool:
    """Documentation, code or an earlier redaction, not a value: ``sk-ant-...``, ``<your key>``,
    ``xxxx``, ``github_pat_xxxx``, ``undefined``, ``[REDACTED:url-password:1]``."""
    return ("..." in secret or "[REDACTED:" in secret or "\u2026" in secret or secret.lower() in _NOT_VALUES
            or _FILLER.fullmatch(secret) is not None or _FILLER_RUN.search(secret) is not None)


#: A keyword hit that is a variable's name (``self.api_key = api_key``), not its value.
_KEY_NAME = re.compile(r"(?=[a-z_.]*[_.])[a-z_][a-z_.]*(?:key|pass|pwd|secret|token)[a-z_]*")


def _plausible(secret: str, text: str, start: int, end: int, plugin: BasePlugin | None) -> bool:
    """detect-secrets' own heuristic filters (its default pipeline) for one candidate,
    plus :func:`_placeholder_like` and, for keyword hits, no code expressions."""
    if len(secret) < 4 or _placeholder_like(secret):
        return False
    if _PROTOCOL_ID.fullmatch(secret) or _UUID.fullmatch(secret):
        return False
    if isinstance(plugin, KeywordDetector) and (re.search(r"[\s()]", secret) or _KEY_NAME.fullmatch(secret)):
        return False
    if heuristic.is_sequential_string(secret) or heuristic.is_potential_uuid(secret):
        return False
    if heuristic.is_templated_secret(secret) or heuristic.is_prefixed_with_dollar_sign(secret):
        return False
    if plugin is not None:
        line = _line_at(text, start, end)
        if heuristic.is_likely_id_string(secret, line, plugin) or heuristic.is_indirect_reference(line):
            return False
        if isinstance(plugin, KeywordDetector) and heuristic.is_not_alphanumeric_string(secret):
            return False
    return True


def _spans_of(value: str, text: str) -> Iterator[tuple[int, int]]:
    at = text.find(value)
    while at >= 0:
        yield at, at + len(value)
        at = text.find(value, at + len(value))


def _plugin_hits(plugin: BasePlugin, kind: str, text: str, lines: Iterable[str] | None = None) -> Iterator[Hit]:
    """The hits of one plugin in ``text``; the keyword and entropy plugins read ``lines`` (the
    lines of ``text`` that can hold their match: :func:`_keyword_lines`,
    :attr:`_Text.quoted_lines`) when given, else every line or the whole text."""
    if isinstance(plugin, _WHOLE_MATCH):
        assert isinstance(plugin, RegexBasedDetector)
        if not any(True for _ in plugin.analyze_string(text)):
            return
        for regex in plugin.denylist:
            for match in regex.finditer(text):
                yield Hit(match.start(), match.end(), kind)
        return
    if isinstance(plugin, KeywordDetector):
        # Session text is mostly shell output and config files: the config rules
        # (unquoted ``password=...``, ``secret: ...``) as for .env/.ini/.yaml files,
        # line by line as detect-secrets runs them (its patterns would cross a newline).
        values: Iterable[str] = {value for line in (text.splitlines() if lines is None else lines)
                                 if _KEYWORD_HINT.search(line) for value in _keyword_values(plugin, line)}
    elif isinstance(plugin, HighEntropyStringsPlugin) and lines is not None:
        # Its quoted runs never hold a line break, so its matches in ``text`` are those in each
        # line; a line without a quoted run of ENTROPY_MIN characters gives only shorter ones.
        values = {value for line in lines for value in plugin.analyze_string(line)}
    else:
        values = set(plugin.analyze_string(text))
    for value in values:
        if not value:
            continue
        if isinstance(plugin, HighEntropyStringsPlugin) and (
                len(value) < ENTROPY_MIN or plugin.calculate_shannon_entropy(value) <= plugin.entropy_limit):
            continue
        if isinstance(plugin, KeywordDetector):
            value = value.strip("'\"")
        for start, end in _spans_of(value, text):
            if _plausible(value, text, start, end, plugin):
                yield Hit(start, end, "aws-secret-key" if kind == "aws-access-key" and len(value) == 40 else kind)


def _keyword_values(plugin: KeywordDetector, line: str) -> Iterator[str]:
    """What ``plugin.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP)`` yields, in its
    order, without its regexes' scan of every position (a few MB/s on long lines).

    Three of its four regexes begin with a denylist word (case-blind), so a match starts at
    most 9 characters (``database_``) before a ``key``, ``pass``, ``pwd``, ``secret`` or
    ``contrase`` of the folded line: trying those starts in order with ``match`` finds what
    ``search`` finds. The fourth (a quoted value then ``==`` and a keyword) runs only when
    :data:`_KEYWORD_BEFORE` holds on the line."""
    folded = _fold(line)
    if plugin.keyword_exclude is not None or len(folded) != len(line):
        yield from plugin.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP)
        return
    starts: set[int] = set()
    for word in _KEYWORDS:
        at = folded.find(word)
        while at >= 0:
            starts.update(range(max(0, at - 9), at + 1))
            at = folded.find(word, at + 1)
    ordered = sorted(starts)
    for regex, group in CONFIG_DENYLIST_REGEX_TO_GROUP.items():
        if regex is _KEYWORD_PRECEDED:
            found = regex.search(line) if _KEYWORD_BEFORE.search(folded) is not None else None
        else:
            found = next((match for at in ordered if (match := regex.match(line, at)) is not None), None)
        if found is not None:
            yield found.group(group)


def _fold(text: str) -> str:
    """``text`` lowered as case-blind matching sees it (U+0130, U+0131, U+017F to i, i, s first)."""
    if not text.isascii() and ("\u0130" in text or "\u0131" in text or "\u017f" in text):
        return text.translate(_FOLD).lower()
    return text.lower()


# Lines the keyword plugin can match at all (its denylist: key, pass, pwd, secret, contraseña).
_KEYWORD_HINT = re.compile(r"(?i)key|pass|pwd|secret|contrase")

# Cheap gates: a plugin runs only on text that holds what its patterns need (``t`` the text,
# ``low`` it in lower case). The assignment-style plugins (Cloudant, IBM, SoftLayer) cost the
# most without them: their patterns try a look-behind at every position.
_CRED_WORDS = ("key", "pw", "pass", "token")


def _cred(low: str) -> bool:
    return any(word in low for word in _CRED_WORDS)


_GATES: dict[str, Callable[[str, str], bool]] = {
    "high-entropy-base64": lambda t, low: "'" in t or '"' in t,
    "high-entropy-hex": lambda t, low: "'" in t or '"' in t,
    "url-password": lambda t, low: "://" in t,
    "jwt": lambda t, low: "eyJ" in t,
    "secret-assignment": lambda t, low: _KEYWORD_HINT.search(t) is not None,
    "aws-access-key": lambda t, low: "A3T" in t or "ABIA" in t or "ACCA" in t or "AKIA" in t or "ASIA" in t
    or "aws" in low,
    "azure-storage-key": lambda t, low: "AccountKey=" in t,
    "cloudant-credentials": lambda t, low: ("cl" in low and _cred(low)) or "cloudant.com" in low,
    "discord-bot-token": lambda t, low: "." in t,
    "github-token": lambda t, low: "gh" in t,
    "gitlab-token": lambda t, low: "gl" in t or "GR1348941" in t,
    "ibm-cloud-iam-key": lambda t, low: _cred(low),
    "ibm-cos-hmac": lambda t, low: "secret" in low and "key" in low,
    "mailchimp-key": lambda t, low: "-us" in t,
    "npm-token": lambda t, low: "_authToken" in t,
    "openai-api-key": lambda t, low: "T3BlbkFJ" in t,
    "pypi-token": lambda t, low: "pypi-" in t,
    "sendgrid-api-key": lambda t, low: "SG." in t,
    "slack-token": lambda t, low: "xox" in t or "hooks.slack" in t,
    "softlayer-credentials": lambda t, low: ("sl" in low and _cred(low)) or "softlayer" in low,
    "square-oauth-secret": lambda t, low: "sq0csp-" in t,
    "stripe-key": lambda t, low: "k_live_" in t,
    "telegram-bot-token": lambda t, low: ":" in t,
}

#: The gates :func:`scan_text` still needs after a kind's candidate holds: the keyword
#: plugin's is implied by its candidate (a keyword line holds one of the gate's words).
_FAST_GATES = {kind: gate for kind, gate in _GATES.items() if kind != "secret-assignment"}

#: The own rules' gates, by position in :data:`OWN_RULES`: a literal every match contains.
_OWN_GATES: tuple[str, ...] = ("sk-ant-", "sk-", "github_pat_", "AIza", "hf_", "npm_", "eyJ", "PRIVATE KEY",
                               "PuTTY-User-Key-File-", "://", "earer", "=")


# --------------------------------------------------------------------------- candidates (docs/secrets.md)
#
# Each plugin and own rule runs on a string only when the string holds a *candidate* for it: a
# substring every one of its matches contains (a literal, or a looser pattern). A string with no
# candidate at all, most of a session, costs a few C-speed passes and no plugin. The conditions
# are necessary, never sufficient: the plugins confirm, so the findings are those of
# :func:`scan_text_reference` (proven by tests/core/test_secrets_fast.py). Case-blind conditions run
# on the lowered text, with the three letters Python's case-blind matching also folds to ASCII
# (dotless i, dotted I, long s) mapped first.

_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s"}
# The entropy plugins' quoted run, >= ENTROPY_MIN (the base64 plugin's charset holds a backslash).
_QUOTED = re.compile(r"[\"'][A-Za-z0-9+/=_\\\-]{20,}[\"']")
_AWS_ID = re.compile(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}")
# The AWS plugin's secret key (case-blind: its [0-9a-zA-Z] also takes the folded letters), on the folded text.
_AWS_QUOTED = re.compile(r"[\"'][a-z0-9/+]{40}[\"']")
# build_assignment_regex with any keyword of Cloudant, IBM IAM, IBM COS, SoftLayer and the
# shortest value any of them takes (24 characters), on the lowered text.
_ASSIGN = re.compile(r"(?:key|pwd?|pass(?:word)?|token)[\"']?\]? *(?:=|:|:=|=>| +|::) *[\"']?[a-z0-9_\-]{24}")
# The keyword plugin's four config forms on the lowered text, within one line (str.splitlines'
# breaks): after a keyword (``key...:``, ``key... =``, ``key... "v";``) or before one (``"v" == key``).
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_SPACE = f"[^\\S{_BREAKS}]"
_KEYWORDS = ("key", "pass", "pwd", "secret", "contrase")
_KEYWORD_AFTER = tuple((word, re.compile(word + r"(?:\w*[\]'\"]{0,2}" + _LINE_SPACE + r"*[:=!]|[^"
                                         + _BREAKS + r"]*?[\"'`];)")) for word in _KEYWORDS)
# The first branch of :data:`_KEYWORD_AFTER`, matched where a keyword starts; the second
# branch is a quote then ``;`` later on the keyword's line.
_KEYWORD_HEAD = re.compile(r"(?:key|pass|pwd|secret|contrase)\w*[\]'\"]{0,2}" + _LINE_SPACE + r"*[:=!]")
# Line breaks of str.splitlines other than "\n".
_RARE_BREAK = re.compile("[" + _BREAKS.replace("\n", "") + "]")
_QUOTE_SEMI = re.compile(r"[\"'`];")
_KEYWORD_BEFORE = re.compile(r"[!=][!=]" + _LINE_SPACE + r"*\w*(?:key|pass|pwd|secret|contrase)")
_DISCORD = re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}")
_TELEGRAM = re.compile(r":(?<=\d{8}:)[0-9A-Za-z_\-]{35}")
_TWILIO = re.compile(r"(?:AC|SK)[a-z0-9]{32}")
_GITHUB = re.compile(r"gh[pousr]_[A-Za-z0-9_]{36}")
_SENDGRID = re.compile(r"SG\.[a-zA-Z0-9_-]{22}\.")
_GITLAB = re.compile(r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941")
_MAILCHIMP = re.compile(r"-us[0-9]")
_ENV_WORDS = ("SECRET", "TOKEN", "PASSW", "API", "ACCESS", "PRIVATE", "CREDENTIAL")
_ENV_CANDIDATE = re.compile(r"(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)"
                            r"[A-Z0-9_]*[ \t]*=")


class _Text:
    """One string and what its candidate conditions share, each computed at most once."""

    __slots__ = ("_assign", "_folded", "_keyword_lines", "_low", "_quoted", "_quoted_lines", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._low: str | None = None
        self._folded: str | None = None
        self._quoted: bool | None = None
        self._assign: bool | None = None
        self._keyword_lines: list[str] | None = None
        self._quoted_lines: list[str] | None = None

    @property
    def low(self) -> str:
        """The text lowered (what the plugins' cheap gates of :data:`_GATES` take)."""
        if self._low is None:
            self._low = self.text.lower()
        return self._low

    @property
    def folded(self) -> str:
        """The text lowered as case-blind matching sees it (U+0130, U+0131, U+017F to i, i, s first)."""
        if self._folded is None:
            text = self.text
            if not text.isascii() and ("\u0130" in text or "\u0131" in text or "\u017f" in text):
                self._folded = text.translate(_FOLD).lower()
            else:
                self._folded = self.low
        return self._folded

    @property
    def quoted(self) -> bool:
        if self._quoted is None:
            self._quoted = ("'" in self.text or '"' in self.text) and _QUOTED.search(self.text) is not None
        return self._quoted

    @property
    def quoted_lines(self) -> list[str]:
        """The ``\\n``-separated lines that hold a quoted run of :data:`_QUOTED`, in text order."""
        if self._quoted_lines is None:
            lines: list[str] = []
            self._quoted_lines = lines
            end = -1
            for match in _QUOTED.finditer(self.text):
                at = match.start()
                if at > end:
                    begin = self.text.rfind("\n", 0, at) + 1
                    end = self.text.find("\n", at)
                    end = len(self.text) if end < 0 else end
                    lines.append(self.text[begin:end])
        return self._quoted_lines

    @property
    def keyword_lines(self) -> list[str]:
        """The lines that hold a candidate of the keyword plugin (in text order, each once)."""
        if self._keyword_lines is None:
            self._keyword_lines = _keyword_lines(self.text, self.folded)
        return self._keyword_lines

    @property
    def assign(self) -> bool:
        if self._assign is None:
            folded = self.folded
            self._assign = (("key" in folded or "pw" in folded or "pass" in folded or "token" in folded)
                            and _ASSIGN.search(folded) is not None)
        return self._assign


#: Per plugin kind: does the string hold a candidate for it? Each holds wherever the plugin
#: finds anything; the plugin runs when it and the plugin's gate of :data:`_GATES` hold.
_CANDIDATES: dict[str, Callable[[_Text], bool]] = {
    "high-entropy-base64": lambda c: c.quoted,
    "high-entropy-hex": lambda c: c.quoted,
    "url-password": lambda c: "://" in c.text and "@" in c.text,
    "jwt": lambda c: "eyJ" in c.text,
    "secret-assignment": lambda c: bool(c.keyword_lines),
    "aws-access-key": lambda c: (("A3T" in c.text or "ABIA" in c.text or "ACCA" in c.text or "AKIA" in c.text
                                  or "ASIA" in c.text) and _AWS_ID.search(c.text) is not None)
    or ("aws" in c.folded and _AWS_QUOTED.search(c.folded) is not None),
    "azure-storage-key": lambda c: "AccountKey=" in c.text,
    "cloudant-credentials": lambda c: c.assign or "cloudant.com" in c.folded,
    "discord-bot-token": lambda c: "." in c.text and _DISCORD.search(c.text) is not None,
    "github-token": lambda c: "gh" in c.text and _GITHUB.search(c.text) is not None,
    "gitlab-token": lambda c: ("gl" in c.text or "GR1348941" in c.text) and _GITLAB.search(c.text) is not None,
    "ibm-cloud-iam-key": lambda c: c.assign,
    "ibm-cos-hmac": lambda c: c.assign,
    "mailchimp-key": lambda c: "-us" in c.text and _MAILCHIMP.search(c.text) is not None,
    "npm-token": lambda c: "_authToken" in c.text,
    "openai-api-key": lambda c: "T3BlbkFJ" in c.text,
    "pypi-token": lambda c: "pypi-" in c.text,
    "sendgrid-api-key": lambda c: "SG." in c.text and _SENDGRID.search(c.text) is not None,
    "slack-token": lambda c: "xox" in c.text or "hooks.slack" in c.text,
    "softlayer-credentials": lambda c: c.assign or "softlayer" in c.folded,
    "square-oauth-secret": lambda c: "sq0csp-" in c.text,
    "stripe-key": lambda c: "k_live_" in c.text,
    "telegram-bot-token": lambda c: ":" in c.text and _TELEGRAM.search(c.text) is not None,
    "twilio-key": lambda c: ("AC" in c.text or "SK" in c.text) and _TWILIO.search(c.text) is not None,
}

#: The own rules' candidates, by position in :data:`OWN_RULES` (each implies its literal of :data:`_OWN_GATES`).
_OWN_CANDIDATES: tuple[Callable[[str], bool], ...] = (
    lambda t: "sk-ant-" in t,
    lambda t: "sk-" in t,
    lambda t: "github_pat_" in t,
    lambda t: "AIza" in t,
    lambda t: "hf_" in t,
    lambda t: "npm_" in t,
    lambda t: "eyJ" in t,
    lambda t: "PRIVATE KEY" in t,
    lambda t: "PuTTY-User-Key-File-" in t,
    lambda t: "://" in t and "@" in t,
    lambda t: "earer" in t,
    lambda t: "=" in t and any(word in t for word in _ENV_WORDS) and _ENV_CANDIDATE.search(t) is not None,
)


#: One pass for every literal or literal-led candidate of :data:`_CANDIDATES` and
#: :data:`_OWN_CANDIDATES`: a string it does not match, that holds no quoted run, no keyword
#: line and no assignment, holds no candidate at all.
_ANCHOR = re.compile("|".join((
    r"A3T|ABIA|ACCA|AKIA|ASIA|AccountKey=|://|eyJ|gh[pousr]_|github_pat_", _GITLAB.pattern, _MAILCHIMP.pattern,
    r"_authToken|T3BlbkFJ|pypi-|SG\.|xox|hooks\.slack|sq0csp-|k_live_|(?:AC|SK)[a-z0-9]{32}|sk-|AIza|hf_|npm_",
    r"PRIVATE KEY|PuTTY-User-Key-File-|earer|SECRET|TOKEN|PASSW|API|ACCESS|PRIVATE|CREDENTIAL",
    _DISCORD.pattern, _TELEGRAM.pattern)))


def _own(index: int) -> str:
    return f"own:{OWN_RULES[index][0]}:{index}"


_ANY = r"\x{80}-\x{10FFFF}"  # any non-ASCII character: RE2's classes are ASCII, Python's Unicode
_CASE_WORDS = "(?i:key|pass|pwd|secret|contrase)"

#: The multi-pattern pass (RE2, one DFA over the text; docs/secrets.md, "Speed"): each pattern
#: with the plugin kinds and own rules it lets through. Each is looser than the candidate
#: conditions of those kinds (non-ASCII characters count as letters, digits and spaces), so a
#: kind none of whose patterns match has no candidate.
_SET_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (_QUOTED.pattern, ("high-entropy-base64", "high-entropy-hex")),
    (r"(?i:aws).*[\"'][A-Za-z0-9/+" + _ANY + r"]{40}[\"']", ("aws-access-key",)),
    (r"A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA", ("aws-access-key",)),
    (_CASE_WORDS + r"[\w" + _ANY + r"]*[\]'\"]{0,2}[\s\x0b\x1c-\x1f" + _ANY + r"]*[:=!]|" + _CASE_WORDS
     + r"[^\n]*[\"'`];|[!=][!=][^\n]*" + _CASE_WORDS, ("secret-assignment",)),
    (r"(?i:key|pw|pass|token)[^\n]*[A-Za-z0-9_\-" + _ANY + "]{24}",
     ("cloudant-credentials", "ibm-cloud-iam-key", "ibm-cos-hmac", "softlayer-credentials")),
    (r"(?i:cloudant\.com|softlayer)", ("cloudant-credentials", "softlayer-credentials")),
    (r"AccountKey=", ("azure-storage-key",)),
    # BasicAuthDetector's and the own url-password rule's user:password@ (RE2's \s is ASCII: a wider class).
    (r"://[^:/?#\[\]@!$&'()*+,;=\s]+:[^:/?#\[\]@!$&'()*+,;=\s]+@", ("url-password",)),
    (r"://[^:/?#\s@\"']+:[^@\s/\"']+@", (_own(9),)),
    (r"eyJ", ("jwt", _own(6))),
    (r"\.[A-Za-z0-9_\-" + _ANY + r"]{6}\.[A-Za-z0-9_\-" + _ANY + r"]{27}", ("discord-bot-token",)),
    (r"gh[pousr]_", ("github-token",)),
    (r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941", ("gitlab-token",)),
    (r"-us[0-9]", ("mailchimp-key",)),
    (r"_authToken", ("npm-token",)),
    (r"T3BlbkFJ", ("openai-api-key",)),
    (r"pypi-", ("pypi-token",)),
    (r"SG\.", ("sendgrid-api-key",)),
    (r"xox|hooks\.slack", ("slack-token",)),
    (r"sq0csp-", ("square-oauth-secret",)),
    (r"k_live_", ("stripe-key",)),
    (r":[0-9A-Za-z_\-]{35}", ("telegram-bot-token",)),
    (r"(?:AC|SK)[a-z0-9]{32}", ("twilio-key",)),
    (r"sk-", (_own(0), _own(1))),
    (r"github_pat_", (_own(2),)),
    (r"AIza", (_own(3),)),
    (r"hf_", (_own(4),)),
    (r"npm_", (_own(5),)),
    (r"PRIVATE KEY", (_own(7),)),
    (r"PuTTY-User-Key-File-", (_own(8),)),
    (r"earer", (_own(10),)),
    (_ENV_CANDIDATE.pattern, (_own(11),)),
)


def _compile_set() -> Any:
    """The RE2 set of :data:`_SET_PATTERNS`, or ``None`` when RE2 (``google-re2``) is not
    installed: then every kind's own candidate condition is tried (slower, same findings)."""
    try:
        import re2  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    patterns = re2.Set.SearchSet()
    for pattern, _ in _SET_PATTERNS:
        patterns.Add(pattern)
    patterns.Compile()
    return patterns


_SET = _compile_set()
# The set's own matcher (UTF-8 in, indexes out), without the wrapper's per-call checks.
_SET_MATCH: Callable[[bytes], list[int] | None] = (getattr(_SET, "_set", _SET).Match if _SET is not None
                                                   else lambda data: None)
_OWN_KEYS = tuple(_own(index) for index in range(len(OWN_RULES)))
_SET_KINDS = tuple(frozenset(kinds) for _, kinds in _SET_PATTERNS)


def _admitted(text: str) -> frozenset[str] | None:
    """The kinds the multi-pattern pass lets through (empty: no candidate at all), or ``None``
    when it cannot run (no RE2, or a lone surrogate, which UTF-8 cannot carry)."""
    if _SET is None:
        return None
    try:
        matched: list[int] | None = _SET_MATCH(text.encode())
    except UnicodeEncodeError:
        return None
    if not matched:
        return frozenset()
    if len(matched) == 1:
        return _SET_KINDS[matched[0]]
    return frozenset().union(*(_SET_KINDS[i] for i in matched))


def _keyword_lines(text: str, folded: str) -> list[str]:
    """The lines of ``text`` (``folded``: :func:`_fold` of it) that hold a candidate of the
    keyword plugin, in text order, each once: a keyword followed on its line by ``:``, ``=``
    or ``!`` (:data:`_KEYWORD_HEAD`) or, anywhere later on the line, by a quote and ``;``;
    or ``==`` / ``!=`` then a keyword (:data:`_KEYWORD_BEFORE`). Linear in the text: each
    line's bounds are found once, and a line without a quote and ``;`` after one keyword
    has none after the next."""
    if len(folded) != len(text):  # never so for str.lower after the fold; every line, to be safe
        return text.splitlines() if _keyword_candidate(folded) else []
    starts = sorted(at for word in _KEYWORDS for at in _occurrences(folded, word))
    lines: list[str] = []
    begin = end = checked = -1
    done = tail = False
    for at in starts:
        if at > end:
            # The line's bounds: by "\n", then by every break of str.splitlines when it holds another.
            begin = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            if _RARE_BREAK.search(text, begin, end) is not None:
                begin = max(text.rfind(ch, begin, at) for ch in _BREAKS) + 1 or begin
                end = min((i for ch in _BREAKS if (i := text.find(ch, at, end)) >= 0), default=end)
            done, tail, checked = False, True, begin
        if done:
            continue
        # The comparison form: only the last ``==``, ``!=``, ``=!`` or ``!!`` before this keyword
        # and after the previous one can start a match ending in it (what lies between a match's
        # pair and its keyword is spaces and word characters).
        pair = max(folded.rfind(two, checked, at) for two in ("==", "!=", "=!", "!!"))
        checked = at
        if _KEYWORD_HEAD.match(folded, at) is not None or (pair >= 0 and _KEYWORD_BEFORE.match(folded, pair)) or (
                tail and (tail := _QUOTE_SEMI.search(folded, at, end) is not None)):
            lines.append(text[begin:end])
            done = True
    return lines


def _occurrences(text: str, word: str) -> Iterator[int]:
    at = text.find(word)
    while at >= 0:
        yield at
        at = text.find(word, at + 1)


def _keyword_candidate(folded: str) -> bool:
    """Does ``folded`` hold a candidate of the keyword plugin anywhere (one regex pass per keyword)?"""
    return (any(word in folded and pattern.search(folded) is not None for word, pattern in _KEYWORD_AFTER)
            or _KEYWORD_BEFORE.search(folded) is not None)


def scan_text(text: str) -> list[Hit]:
    """Every secret in ``text``, as non-overlapping spans in text order.

    Overlapping hits of several rules become one span (the union) with the kind
    of the rule that found the longest of them. The plugins and own rules run only
    where the text holds a candidate for them (docs/secrets.md, "Speed"): the
    findings are those of :func:`scan_text_reference`, at tens of MB/s.
    """
    prepared = _prepare(text)
    return [] if prepared is None else _scan_prepared(*prepared)


def _prepare(text: str) -> tuple[str, frozenset[str] | None] | None:
    """``None`` when ``text`` holds no candidate of any rule (by the multi-pattern pass), else
    the text to scan (earlier placeholders blanked) and the kinds the pass admits (``None``:
    the pass could not run, every kind's own condition decides)."""
    if len(text) < 8:
        return None
    if "[REDACTED:" in text:
        text = _PLACEHOLDER.sub(lambda m: " " * len(m.group(0)), text)
    admitted = _admitted(text)
    if admitted is not None and not admitted:
        return None  # most strings of a session: no candidate of any rule
    return text, admitted


def _scan_prepared(text: str, admitted: frozenset[str] | None) -> list[Hit]:
    """:func:`scan_text` of a string :func:`_prepare` let through."""
    candidate = _Text(text)
    if admitted is None and not (candidate.quoted or _ANCHOR.search(text) is not None or candidate.keyword_lines
                                 or candidate.assign or "cloudant.com" in candidate.folded
                                 or "softlayer" in candidate.folded):
        return []  # most strings of a session: no candidate of any rule
    hits: list[Hit] = []
    for plugin, kind in PLUGIN_KINDS:
        if admitted is not None and kind not in admitted:
            continue
        if _CANDIDATES[kind](candidate) and ((gate := _FAST_GATES.get(kind)) is None or gate(text, candidate.low)):
            hits.extend(_plugin_hits(plugin, kind, text, candidate.keyword_lines
                                     if isinstance(plugin, KeywordDetector) else candidate.quoted_lines
                                     if isinstance(plugin, HighEntropyStringsPlugin) else None))
    for index, ((kind, pattern), holds) in enumerate(zip(OWN_RULES, _OWN_CANDIDATES, strict=True)):
        if (admitted is None or _OWN_KEYS[index] in admitted) and holds(text):
            hits.extend(_own_hits(kind, pattern, text))
    return _merge(hits)


def _own_hits(kind: str, pattern: re.Pattern[str], text: str) -> Iterator[Hit]:
    group = "secret" if "secret" in pattern.groupindex else 0
    for match in pattern.finditer(text):
        start, end = match.span(group)
        if end - start >= 8 and _plausible(match.group(group), text, start, end, None):
            yield Hit(start, end, kind)


def scan_text_reference(text: str) -> list[Hit]:
    """:func:`scan_text` without candidates: every plugin whose cheap gate passes runs on the
    whole text (the scanner before docs/secrets.md, "Speed"). Kept as the reference the fast
    path is proven equal to; slow (a few MB/s)."""
    if len(text) < 8:
        return []
    if "[REDACTED:" in text:
        # A redacted file scans clean: placeholders become blanks of the same length
        # (offsets unchanged), so "url-password:1]" is no ``password: value``.
        text = _PLACEHOLDER.sub(lambda m: " " * len(m.group(0)), text)
    hits: list[Hit] = []
    low = text.lower()
    for plugin, kind in PLUGIN_KINDS:
        gate = _GATES.get(kind)
        if gate is not None and not gate(text, low):
            continue
        hits.extend(_plugin_hits(plugin, kind, text))
    for (kind, pattern), literal in zip(OWN_RULES, _OWN_GATES, strict=True):
        if literal in text:
            hits.extend(_own_hits(kind, pattern, text))
    return _merge(hits)


def _merge(hits: list[Hit]) -> list[Hit]:
    if len(hits) <= 1:
        return hits
    hits.sort(key=lambda h: (h.start, -(h.end - h.start)))
    merged: list[Hit] = []
    for hit in hits:
        if merged and hit.start < merged[-1].end:
            last = merged[-1]
            if hit.end > last.end:
                kind = hit.kind if hit.end - hit.start > last.end - last.start else last.kind
                merged[-1] = Hit(last.start, hit.end, kind)
            continue
        merged.append(hit)
    return merged


