"""The embedded default store: one SQLite file (WAL, synchronous=FULL), one connection per process, each
transaction a synchronous function run whole in the driver's thread under BEGIN IMMEDIATE.

Everything SQLite-specific lives in this package: its own SQL (leader leases, the write probe, pages and PRAGMAs),
schema.sql and migrations/, the connection, the instance lock (one process per database, C10), the online backup
and restore. The shared queries are store/shared's; this package never imports store/postgres.
"""
from .backup import backup_before_migration, restore
from .lock import InstanceLock
from .store import DEFAULT_ATTEMPT_CAP, DEFAULT_CAPACITY, DEFAULT_DEBOUNCE_MS, DEFAULT_LEASE_S, SqliteStore

__all__ = ["DEFAULT_ATTEMPT_CAP", "DEFAULT_CAPACITY", "DEFAULT_DEBOUNCE_MS", "DEFAULT_LEASE_S", "InstanceLock",
           "SqliteStore", "backup_before_migration", "restore"]
