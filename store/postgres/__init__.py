"""The PostgreSQL store (SHOPBOT_DB=postgresql://...): psycopg 3 with its connection pool, each transaction a
synchronous function run whole in a thread; schema.sql and migrations/ with SQLite's version numbers; the guards
for what SQLite's single writer serialises (guards.py). Needs the `postgres` extra (psycopg, psycopg-pool)."""
from ..locations import redact
from .store import PostgresStore

__all__ = ["PostgresStore", "redact"]
