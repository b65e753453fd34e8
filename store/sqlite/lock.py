"""The instance lock (C10): one process per database owns recovery, the worker and the relays.

An advisory `flock` on `<db>.lock`, held for the life of the process and released by the OS when it dies (even by
SIGKILL), so a crashed process never leaves a stale lock behind.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import InstanceLocked, StoreUnavailable


class InstanceLock:
    def __init__(self, db_path: Path) -> None:
        self.path = Path(str(db_path) + ".lock")
        self._fd: int | None = None

    def acquire(self) -> InstanceLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:       # a missing or read-only folder: one sentence, not a traceback
            raise StoreUnavailable(f"cannot create the instance lock {self.path}: {exc.strerror} (is the "
                                   "database's folder there and writable?)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise InstanceLocked(str(self.path.with_suffix("")), holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> InstanceLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
