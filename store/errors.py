"""The store's exceptions. Driver errors are translated here and nowhere else; expected outcomes of admission
(duplicate, conflict, refused) are return values, not exceptions."""
from __future__ import annotations


class ShopbotError(Exception):
    """Root of every error shopbot raises on purpose; the other packages' errors derive from it."""


class PartStopped(ShopbotError):
    """A part of the bot (the worker, the relay, ingestion) stopped on a fault of the bot's own configuration that an
    operator must fix (a refused token, a bad model key, a second poller): its work was left where it was."""

    def __init__(self, part: str, reason: str) -> None:
        self.part, self.reason = part, reason
        super().__init__(reason)


class StoreError(ShopbotError):
    """Root of every error the store raises."""


def retry_delay(failures: int) -> float:
    """Seconds a part waits after `failures` consecutive failures (a database it cannot use, a getUpdates that
    failed) before trying again: 1 s, doubling, at most 30 s."""
    return min(30.0, 0.5 * 2.0 ** min(failures, 6))


class SchemaTooNew(StoreError):
    def __init__(self, found: int, supported: int, path: str) -> None:
        self.found, self.supported, self.path = found, supported, path
        super().__init__(
            f"{path} was written by a newer shopbot (schema version {found}; this version knows up to {supported}). "
            "Nothing was changed. Upgrade shopbot, or restore a backup made by this version.")


class SchemaTooOld(StoreError):
    def __init__(self, found: int, supported: int, path: str) -> None:
        self.found, self.supported, self.path = found, supported, path
        super().__init__(
            f"{path} has schema version {found}, this shopbot needs {supported}. Nothing was changed. "
            f"Back it up (`shopbot backup PATH`), then run `shopbot migrate --db {path}`.")


class NotShopbotDatabase(StoreError):
    """The file is not a shopbot database: damaged, not SQLite at all, or SQLite holding someone else's tables."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(f"{path} is not a usable shopbot database ({why}). Nothing was changed. Check SHOPBOT_DB, "
                         "or restore a backup with `shopbot restore PATH`.")


class RestoreRefused(StoreError):
    """`shopbot restore` refused the file (not a shopbot database, fails integrity_check, newer schema): nothing
    changed."""


class IllegalTransition(StoreError):
    """The database refused a move (a trigger's refusal: C1, C4-C8, C11, C19, an order's or a sales day's) or the
    code found the move illegal. Carries the table, the row, the state the move expected and the state found (None
    where the database only said no)."""

    def __init__(self, message: str, *, table: str | None = None, row: object = None,
                 expected: object = None, found: object = None) -> None:
        self.table, self.row, self.expected, self.found = table, row, expected, found
        super().__init__(message)


class NotClaimed(StoreError):
    """A worker tried to finish, release or fail work it does not hold (C5)."""

    def __init__(self, run_id: str, detail: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id}: {detail}")


class LeaseLost(StoreError):
    """A singleton's write was refused by its leader-lease fence (C16): the lease `name` is no longer held by this
    holder and generation, or it expired. Nothing of the transaction was written; the singleton must stop."""

    def __init__(self, name: str, holder: str, generation: int) -> None:
        self.name, self.holder, self.generation = name, holder, generation
        super().__init__(f"the {name} lease is no longer held by {holder[:8]}/{generation}: nothing was written")


class UnknownTarget(StoreError):
    """A report, delivery, session or prompt that does not exist."""


class StoreBusy(StoreError):
    """Another process held the database's write lock for longer than the busy timeout."""


class StoreUnavailable(StoreError):
    """The database cannot be written (disk full, read-only, I/O error, missing file)."""


class ConnectionLost(StoreUnavailable):
    """The database server ended the connection before the transaction committed (a server restart,
    `pg_terminate_backend`, an idle timeout, a network drop before COMMIT was sent): nothing of it was written, so
    running it again on a fresh connection is safe for a caller whose step may simply be repeated (start-up)."""


class CommitUnknown(StoreUnavailable):
    """The connection was lost after COMMIT was sent (K16): the transaction may or may not have committed. The
    store reads the outcome back from the records on a fresh connection where it can (a finish, a `sending` mark);
    nobody guesses it."""


class InstanceLocked(StoreError):
    def __init__(self, path: str, pid: str) -> None:
        self.path, self.pid = path, pid
        super().__init__(
            f"another shopbot process (pid {pid or 'unknown'}) owns {path}; one process per database runs the "
            "worker, the relays and recovery. Stop it first, or use a different SHOPBOT_DB.")


def trigger_table(text: str) -> str | None:
    """The table a trigger's refusal names (`C7: deliveries: ...`), if it names one (both dialects' triggers)."""
    words = text.replace(":", " ").split()
    return next((w for w in words if w in ("work", "reports", "deliveries", "actions", "proposals", "resolutions")),
                None)
