"""Where a store lives: a SQLite file path, or a PostgreSQL URL (never taken for a file path, never shown with its
password)."""
from __future__ import annotations

import re
from pathlib import Path

_PASSWORD = re.compile(r"(://[^:/@]+):[^@]*@")


def is_database_url(location: object) -> bool:
    """A PostgreSQL URL (`postgresql://` or `postgres://`)."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """The URL without its password, for messages, logs and `shopbot status`."""
    return _PASSWORD.sub(r"\1:***@", url)


def describe(location: Path | str) -> str:
    """A location as an operator reads it: the resolved file path, or the URL without its password."""
    return redact(str(location)) if is_database_url(location) else str(Path(location).resolve())
