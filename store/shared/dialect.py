"""The SQL whose text differs between SQLite and PostgreSQL, named once: each dialect writes every field in its own
words, in one place (store/sqlite/dialect.py, store/postgres/dialect.py), and its store hands it to the shared
queries that need it. Nothing rewrites SQL at run time; a field missing from a dialect is a TypeError at import.

What differs is small on purpose: string aggregation, the planner hints SQLite needs (PostgreSQL's planner chooses
on its own), and the guarded statements of PostgreSQL (store/postgres/guards.py, where SQLite's single writer makes
the shared statement whole). Placeholders are the same in both: every statement of store/ marks its parameters as
PostgreSQL does, `$1` .. `$n`, and both connections bind them natively (store/shared/connection.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DialectSQL:
    # An expression: the `tg:` sources of delivery `d`'s report joined by ',' (the message a first part replies to).
    report_sources: str
    # The oldest open row of each tallied table (metrics), read through its partial index.
    oldest_open: Mapping[str, str]
    # Where transactions commit at once (PostgreSQL), the highest id of each tallied table that no transaction still
    # open can be holding below (NULL while one writes to the table): an id is drawn at INSERT, so a row committed
    # later may have a lower id than one already seen. Read in a transaction of its own before the tally's read
    # (store/shared/metrics.py `settled_ids`). None where one writer commits at a time (SQLite).
    settled: Mapping[str, str] | None
    # Retention: one batch of old journal rows (operations of ended runs with no proposal or draft), oldest first;
    # parameters (cutoff, batch).
    prune_operations: str
