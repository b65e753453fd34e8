"""The embedded default store: one SQLite file (WAL, synchronous=FULL), one connection per process, each
transaction a synchronous function run whole in the driver's thread under BEGIN IMMEDIATE.

Everything SQLite-specific lives in this package: the SQL, schema.sql and migrations/, the connection, the
instance lock (one process per database, C10), the online backup and restore.
"""
from .backup import backup_before_migration, restore
from .lock import InstanceLock
from .store import DEFAULT_ATTEMPT_CAP, DEFAULT_CAPACITY, DEFAULT_DEBOUNCE_MS, DEFAULT_LEASE_S, SqliteStore
from .transaction import SqliteTransaction

__all__ = ["DEFAULT_ATTEMPT_CAP", "DEFAULT_CAPACITY", "DEFAULT_DEBOUNCE_MS", "DEFAULT_LEASE_S", "InstanceLock",
           "SqliteStore", "SqliteTransaction", "backup_before_migration", "restore"]
