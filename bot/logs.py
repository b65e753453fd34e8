"""Logging setup with secret redaction (docs/contracts.md, "Facts at the edges").

Every handler `setup_logging` installs carries a `RedactingFilter` and a redacting formatter, so a secret never
reaches stderr or the log file, whichever logger wrote it:

- each registered secret (non-empty, at least 4 characters; also in its URL-encoded form) becomes `****`;
- any `user:password@` in a URL becomes `****@`;
- anything shaped like a Telegram bot token (`123456:AA…`) becomes `****`, even if nobody registered it.

The filter rewrites the record (message with its args merged, exception text, stack text), and the formatter
redacts the final formatted line again, so secrets in `%(asctime)s`-adjacent fields, tracebacks or args are
covered. Secrets learned later (a till token read from the store, say) are added with `add_secret`.

Formats: `text` (default) writes `<UTC time with offset> LEVEL logger message`; `json` (SHOPBOT_LOG_FORMAT=json)
writes one JSON object a line with `ts` (UTC, ISO 8601 with `+00:00`), `level`, `logger`, `event` (a stable name from
bot/log_events.py, or `lib.<logger>` for a library's line), `message`, the ids the line names (`work_id`,
`report_id`, `run_id`, `update_id`, `source`, `action_id`) and `exc` for a traceback; the same redaction runs on every
field and again on the whole line. Python warnings are logged too (`py.warnings`, event `lib.warnings`). A log
file is opened with `WatchedFileHandler`, so logrotate may move it away (no `copytruncate` needed).

Levels: the root logger at `level`; `httpx` and `httpcore` at WARNING (httpx logs every request URL, token
included, at INFO); `telegram` at INFO (PTB logs request payloads at DEBUG), or `level` when that is higher.
A logger's own level is what decides for records that propagate to the root handlers, so these are set
explicitly rather than left to inherit.
"""
from __future__ import annotations

import json
import logging
import logging.handlers
import re
import sys
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from bot.log_events import BY_TEMPLATE, ID_KEYS

__all__ = ["FORMAT", "FORMATS", "JsonFormatter", "RedactingFilter", "add_secret", "redact", "setup_logging"]

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
FORMATS = ("text", "json")
_ID_RE = re.compile(r"\b(" + "|".join(ID_KEYS) + r")=([^\s,;()]+)")
MASK = "****"
_MIN_SECRET = 4

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first, replaced atomically as a tuple
_USERINFO_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@:]+:[^/\s@]*@")
_BOT_TOKEN_RE = re.compile(r"\d{3,}:[A-Za-z0-9_-]{30,}")


def add_secret(secret: str | None) -> None:
    """Redact `secret` from now on in every handler `setup_logging` installed (ignored if shorter than 4)."""
    global _secrets
    if not secret or len(secret) < _MIN_SECRET:
        return
    variants = {secret, quote(secret, safe=""), quote(secret, safe="/:")}
    with _lock:
        current = set(_secrets) | {v for v in variants if len(v) >= _MIN_SECRET}
        _secrets = tuple(sorted(current, key=len, reverse=True))


def _reset_secrets() -> None:
    global _secrets
    with _lock:
        _secrets = ()


def redact(text: str) -> str:
    """Apply every redaction rule to `text`."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _USERINFO_RE.sub(rf"\g<scheme>{MASK}@", text)
    return _BOT_TOKEN_RE.sub(MASK, text)


class RedactingFilter(logging.Filter):
    """Rewrites a record so that its message, args, exception and stack text carry no secret.

    Always returns True: it redacts, it never drops.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "event"):     # named before the template is merged with its args
            record.event = event_of(record)
        try:
            message = record.getMessage()
        except Exception:  # a malformed format/args pair: keep both visible, redacted
            message = f"{record.msg!r} % {record.args!r}"
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def event_of(record: logging.LogRecord) -> str:
    """The stable name of a record: from the catalogue by (logger, template), else `lib.<top-level logger>`."""
    template = record.msg if isinstance(record.msg, str) else ""
    event = BY_TEMPLATE.get((record.name, template))
    if event:
        return event
    top = record.name.split(".")[0] or "root"
    return "lib.warnings" if record.name == "py.warnings" else f"lib.{top}"


def utc_time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class _RedactingFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_time(record)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module docstring); every value redacted, then the whole line again."""

    def format(self, record: logging.LogRecord) -> str:
        message = redact(record.getMessage())
        line: dict[str, object] = {"ts": utc_time(record), "level": record.levelname, "logger": record.name,
                                   "event": getattr(record, "event", None) or event_of(record), "message": message}
        for key, value in _ID_RE.findall(message):
            line.setdefault(key, value.rstrip(":."))
        for key in ID_KEYS:
            if key in record.__dict__ and record.__dict__[key] is not None:
                line[key] = redact(str(record.__dict__[key]))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = redact(record.exc_text)
        if record.stack_info:
            line["stack"] = redact(record.stack_info)
        return redact(json.dumps(line, ensure_ascii=False, default=str))


_OWN_HANDLER = "_shopbot_handler"


def setup_logging(level: str, secrets: Iterable[str], log_file: Path | None = None, fmt: str = "text") -> None:
    """Install redacting handlers on the root logger (stderr, and `log_file` when given) in `fmt` (text or json).
    Idempotent."""
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else int(level)
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}: text or json")
    for secret in secrets:
        add_secret(secret)

    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _OWN_HANDLER, False):
            root.removeHandler(handler)
            handler.close()

    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.handlers.WatchedFileHandler(log_file, encoding="utf-8"))
    for handler in handlers:
        setattr(handler, _OWN_HANDLER, True)
        handler.addFilter(RedactingFilter())
        handler.setFormatter(JsonFormatter() if fmt == "json" else _RedactingFormatter(FORMAT))
        root.addHandler(handler)
    root.setLevel(numeric)
    logging.captureWarnings(False)     # re-installed every time: something may have replaced showwarning since
    logging.captureWarnings(True)

    logging.getLogger("httpx").setLevel(max(logging.WARNING, numeric))
    logging.getLogger("httpcore").setLevel(max(logging.WARNING, numeric))
    logging.getLogger("telegram").setLevel(max(logging.INFO, numeric))
