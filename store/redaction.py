"""The one redaction of outside text on its way into the store (docs/contracts.md, "Facts at the edges": no secret
is stored or sent).

Error details come from outside: a model server's or a supplier's error body, a Telegram error. Some servers repeat
the credential they refused ("Incorrect API key provided: sk-..."). Whatever such text reaches — a report (and so
its Telegram parts), a notice, an action's or a delivery's reason, a run's stop reason — passes through here first,
inside the store, so no caller can forget it:

- `secrets_only(text)`: the configured secrets (`register`), matched exactly (and URL-quoted), become `****`.
  Applied to every report body.
- `error_detail(text)`: the same, and anything shaped like a credential: `sk-...`/`sk_...` API keys, `Bearer xyz`,
  `api_key=...`-style pairs, Telegram bot tokens, `user:password@` in URLs. Applied to error reports, notices and
  every reason column (never to ordinary reports, where such shapes may be the owner's own words).
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import overload
from urllib.parse import quote

MASK = "****"
MIN_SECRET = 4

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()          # longest first

_SHAPES = (
    (re.compile(r"\b(sk|rk|pk)([-_])[A-Za-z0-9_*-]{8,}"), r"\1\2" + MASK),     # sk-..., sk-proj-..., sk_live_...
    (re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=*-]{6,}"), r"\1\2" + MASK),
    (re.compile(r"(?i)\b((?:x-)?api[-_ ]?key|access[-_ ]?token|secret|password|passwd)(\"?'?\s*[:=]\s*\"?'?)"
                r"[^\s\"',;}]{4,}"), r"\1\2" + MASK),
    (re.compile(r"\b\d{3,}:[A-Za-z0-9_-]{30,}"), MASK),                                  # a Telegram bot token
    (re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@:]+:[^/\s@]*@"), r"\g<scheme>" + MASK + "@"),
)


def register(secrets: Iterable[str]) -> None:
    """Add configured secret values (shorter than 4 characters are ignored: they would mask ordinary words)."""
    global _secrets
    values = {v for s in secrets if s and len(s) >= MIN_SECRET
              for v in (s, quote(s, safe=""), quote(s, safe="/:")) if len(v) >= MIN_SECRET}
    if not values:
        return
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | values, key=len, reverse=True))


def secrets_only(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


@overload
def error_detail(text: str) -> str: ...


@overload
def error_detail(text: None) -> None: ...


def error_detail(text: str | None) -> str | None:
    """Outside error text as the store keeps it: the configured secrets, and anything shaped like a credential,
    masked."""
    if text is None:
        return None
    text = secrets_only(text)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text
