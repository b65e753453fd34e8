"""The invariant check on a SQLite file: the shared rules (store/shared/invariants.py) on a fresh read-only
connection of the database file, one snapshot for every rule."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ..records import Violation
from ..shared.invariants import RULES, check_connection

__all__ = ["RULES", "check"]


def check(path: Path) -> list[Violation]:
    """Run every rule on a fresh read-only connection of the database file."""
    if not Path(path).exists():
        raise FileNotFoundError(f"no database at {path}")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("BEGIN")   # one snapshot for every rule
        return check_connection(conn)
    finally:
        conn.close()
