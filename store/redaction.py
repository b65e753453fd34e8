"""The one set of redaction rules, for the log lines, the store and the Telegram texts (docs/contracts.md, "Facts
at the edges": no secret is stored, logged or sent; C21: outside text is cut and stripped, redaction is linear).

Outside text (a model server's or a supplier's error body, a Telegram error) may repeat the credential it refused
("Incorrect API key provided: sk-..."), forge log lines with control characters, or be megabytes long.

- `secrets_only(text)`: the configured secrets (`register`), matched exactly (and URL-quoted), become `****`.
  Applied to every ordinary report body (where credential shapes may be the owner's own words).
- `redact(text)` (also `error_detail`, its name in the store): the same, and anything shaped like a credential:
  `sk-...`/`sk_...` API keys, `Bearer xyz`, `api_key=...`-style pairs, Telegram bot tokens, `user:password@` in
  URLs. Applied to every log record (once: bot/logs.py), to error reports, notices, every reason column, and the
  reasons of failed sends.
- `outside(text, limit)`: outside text as one line: cut to `limit` characters first, control characters (line
  breaks, bidi overrides) replaced by spaces, then redacted.

Every pattern is linear in the text: each starts only at an anchor (a word boundary, the start of a digit run,
`://`) and scans a class that cannot run into the next anchor's start, so no start position rescans what an
earlier one scanned. (The old `[A-Za-z][A-Za-z0-9+.-]*://` and unanchored `\\d{3,}:` tried every letter or digit as
a start: 200 KB took about a minute.) A text cut before redaction never shows the start of a secret cut in two.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import overload
from urllib.parse import quote

MASK = "****"
MIN_SECRET = 4
LIMIT = 10_000                 # outside text is cut to this many characters before anything else

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()          # longest first

_SHAPES = (
    (re.compile(r"\b(sk|rk|pk)([-_])[A-Za-z0-9_*-]{8,}"), r"\1\2" + MASK),     # sk-..., sk-proj-..., sk_live_...
    (re.compile(r"(?i)\b(bearer)(\s{1,10})[A-Za-z0-9._~+/=*-]{6,}"), r"\1\2" + MASK),
    (re.compile(r"(?i)\b((?:x-)?api[-_ ]?key|access[-_ ]?token|secret|password|passwd)(\"?'?\s{0,10}[:=]\s{0,10}"
                r"\"?'?)[^\s\"',;}]{4,}"), r"\1\2" + MASK),
    (re.compile(r"(?<!\d)\d{3,}:[A-Za-z0-9_-]{30,}"), MASK),                          # a Telegram bot token
    (re.compile(r"://[^/\s@:]+:[^/\s@]*@"), "://" + MASK + "@"),                     # user:password@ in a URL
)
# C0 and C1 controls (tab kept), DEL, line and paragraph separators, bidi overrides and isolates
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def register(secrets: Iterable[str]) -> None:
    """Add configured secret values (shorter than 4 characters are ignored: they would mask ordinary words)."""
    global _secrets
    values = {v for s in secrets if s and len(s) >= MIN_SECRET
              for v in (s, quote(s, safe=""), quote(s, safe="/:")) if len(v) >= MIN_SECRET}
    if not values:
        return
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | values, key=len, reverse=True))


def forget_all() -> None:
    """Tests only: start again with no registered secret."""
    global _secrets
    with _lock:
        _secrets = ()


def secrets_only(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact(text: str) -> str:
    """Every rule: the configured secrets and every credential shape masked. Linear in `len(text)`."""
    text = secrets_only(text)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


@overload
def error_detail(text: str) -> str: ...


@overload
def error_detail(text: None) -> None: ...


def error_detail(text: str | None) -> str | None:
    """Outside error text as the store keeps it: `redact`, None kept."""
    return None if text is None else redact(text)


def cut(text: str, limit: int = LIMIT) -> str:
    """At most `limit` characters (then "…"); a registered secret cut in two at the end is masked whole."""
    if len(text) <= limit:
        return text
    text = text[:limit]
    for secret in _secrets:                # the start of a secret at the cut would survive redaction
        for size in range(min(len(secret) - 1, limit), MIN_SECRET - 1, -1):
            if text.endswith(secret[:size]):
                return text[:-size] + MASK + "…"
    return text + "…"


def strip_controls(text: str) -> str:
    """Control characters (line breaks included: a forged log line) become spaces."""
    return _CONTROL.sub(" ", text)


def outside(text: str, limit: int = LIMIT) -> str:
    """Outside text made safe to log, store or show: cut, one line, redacted."""
    return redact(strip_controls(cut(text, limit)))
