"""Why the database does not take writes, as a fixed sentence (/healthz): both dialects' write probes end here
(store/sqlite/health.py `probe`; PostgresStore.writable)."""
from __future__ import annotations

from ..errors import StoreBusy, StoreError, StoreUnavailable


def reason(exc: StoreError) -> str:
    """A fixed sentence for why a write could not commit: no path, no SQL, no data."""
    text = str(exc).lower()
    if isinstance(exc, StoreBusy) or "locked" in text or "busy" in text:
        return "the database is write-locked by another connection"
    if "full" in text:
        return "the database is full: no room for new pages"
    if "readonly" in text or "read-only" in text:
        return "the database is read-only"
    if isinstance(exc, StoreUnavailable):
        return "the database cannot be written (I/O error)"
    return "the database cannot be written"
