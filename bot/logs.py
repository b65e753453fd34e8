"""Logging setup with secret redaction (docs/contracts.md, "Facts at the edges").

Every handler `setup_logging` installs carries a `RedactingFilter`, so a secret never reaches stderr or the log
file, whichever logger wrote it. The rules are the one set in store/redaction.py (the same for the store and the
Telegram texts): each registered secret (at least 4 characters; also URL-encoded), `user:password@` in a URL,
anything shaped like a Telegram bot token, an `sk-` key, a `Bearer` token or an `api_key=` pair becomes `****`.

The filter rewrites the record once (message with its args merged, exception text, stack text) and marks it, so
the formatters and a second handler do not redact it again. The message becomes one line (control characters and
forged line breaks become spaces) of at most `MESSAGE_LIMIT` characters, cut before it is redacted (C21: a
megabyte from an outside server never reaches the patterns or the file whole); a traceback is cut likewise.
Secrets learned later (a till token read from the store, say) are added with `add_secret`.

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
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from bot.log_events import BY_TEMPLATE, ID_KEYS
from store import redaction
from store.redaction import redact

__all__ = ["FORMAT", "FORMATS", "JsonFormatter", "RedactingFilter", "add_secret", "redact", "setup_logging"]

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
FORMATS = ("text", "json")
_ID_RE = re.compile(r"\b(" + "|".join(ID_KEYS) + r")=([^\s,;()]+)")
MESSAGE_LIMIT = 4_000          # characters of a message, and of a traceback: a JSON line stays under 10,000
LINE_LIMIT = 10_000           # one JSON line at most (escaped newlines can double a traceback's length)
_DONE = "_shopbot_redacted"


def add_secret(secret: str | None) -> None:
    """Redact `secret` from now on in every log line (and the store's texts); ignored if shorter than 4."""
    if secret:
        redaction.register([secret])


def _reset_secrets() -> None:
    redaction.forget_all()


class RedactingFilter(logging.Filter):
    """Rewrites a record so that its message, args, exception and stack text carry no secret.

    Always returns True: it redacts, it never drops.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _DONE, False):    # another handler's filter did it: once per record
            return True
        if not hasattr(record, "event"):     # named before the template is merged with its args
            record.event = event_of(record)
        try:
            message = record.getMessage()
        except Exception:  # a malformed format/args pair: keep both visible, redacted
            message = f"{record.msg!r} % {record.args!r}"
        record.msg = redaction.outside(message, MESSAGE_LIMIT)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(redaction.cut(record.exc_text, MESSAGE_LIMIT))
        if record.stack_info:
            record.stack_info = redact(redaction.cut(record.stack_info, MESSAGE_LIMIT))
        setattr(record, _DONE, True)
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
        line = super().format(record)
        return line if getattr(record, _DONE, False) else redact(line)


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module docstring); every value redacted, then the whole line again."""

    def format(self, record: logging.LogRecord) -> str:
        done = getattr(record, _DONE, False)
        message = record.getMessage() if done else redaction.outside(record.getMessage(), MESSAGE_LIMIT)
        line: dict[str, object] = {"ts": utc_time(record), "level": record.levelname, "logger": record.name,
                                   "event": getattr(record, "event", None) or event_of(record), "message": message}
        for key, value in _ID_RE.findall(message):
            line.setdefault(key, value.rstrip(":."))
        for key in ID_KEYS:
            if key in record.__dict__ and record.__dict__[key] is not None:
                line[key] = redaction.outside(str(record.__dict__[key]), 200)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text if done else redact(redaction.cut(record.exc_text, MESSAGE_LIMIT))
        if record.stack_info:
            line["stack"] = record.stack_info if done else redact(redaction.cut(record.stack_info, MESSAGE_LIMIT))
        text = json.dumps(line, ensure_ascii=False, default=str)
        while len(text) > LINE_LIMIT and isinstance(line.get("exc") or line.get("stack"), str):
            key = "exc" if isinstance(line.get("exc"), str) and line["exc"] else "stack"
            line[key] = str(line[key])[:len(str(line[key])) // 2] + "…"     # escaping grew it: the trace gives way
            text = json.dumps(line, ensure_ascii=False, default=str)
        return text


class OncePerSecond(logging.Filter):
    """Lets a record whose message starts with `prefix` through at most once per `every_s`, saying how many were
    held back. asyncio logs "socket.accept() out of system resource" at every retry of a listening socket whose
    process ran out of descriptors (61,382 lines, 28 MB in 7 s under a flood): one line a second tells as much."""

    def __init__(self, prefix: str, every_s: float = 1.0) -> None:
        super().__init__()
        self.prefix, self.every_s = prefix, every_s
        self._last = float("-inf")
        self.held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.prefix):
            return True
        if record.created - self._last < self.every_s:
            self.held += 1
            return False
        if self.held:
            record.msg = f"{record.msg} ({self.held} more like it in the last {record.created - self._last:.0f} s)"
            record.exc_info, record.exc_text = None, None      # the same traceback every time: once is enough
        self._last, self.held = record.created, 0
        return True


ACCEPT_FLOOD = "socket.accept() out of system resource"
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

    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, OncePerSecond) for f in asyncio_log.filters):
        asyncio_log.addFilter(OncePerSecond(ACCEPT_FLOOD))
    logging.getLogger("httpx").setLevel(max(logging.WARNING, numeric))
    logging.getLogger("httpcore").setLevel(max(logging.WARNING, numeric))
    logging.getLogger("telegram").setLevel(max(logging.INFO, numeric))
