"""Shared helpers of the benchmarks: machine description, scratch databases, order statistics."""
from __future__ import annotations

import contextlib
import math
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent


def machine(scratch: Path | None = None) -> dict[str, str]:
    """What the figures were measured on: kernel, CPU, memory, the disk holding the scratch databases."""
    cpu = "?"
    cores = 0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "?":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("processor"):
                cores += 1
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) // 1024} MiB"
    except OSError:
        pass
    where = scratch or Path(tempfile.gettempdir())
    try:
        df = subprocess.run(["df", "-h", str(where)], capture_output=True, text=True, check=False).stdout.strip()
        df = df.splitlines()[-1]
    except OSError:
        df = "?"
    try:
        fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,OPTIONS", "-T", str(where)], capture_output=True,
                            text=True, check=False).stdout.strip()
    except OSError:
        fs = "?"
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "?"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "load": f"{load} (1/5/15 min load average at the start; a shared machine is noisy)",
        "uname": _uname(),
        "cpu": f"{cpu} x {cores}",
        "memory": mem,
        "disk": df,
        "filesystem": fs,
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "command": " ".join([Path(sys.executable).name, "-m", _module()] + sys.argv[1:]),
    }


def _uname() -> str:
    try:
        return subprocess.run(["uname", "-a"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return " ".join(platform.uname())


def _module() -> str:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec.name if spec else sys.argv[0]


def print_machine(scratch: Path | None = None) -> None:
    for key, value in machine(scratch).items():
        print(f"# {key:10} {value}")


def scratch_dir(base: str | None = None) -> Path:
    """A fresh directory for scratch databases (on the disk under test: --dir or $SHOPBOT_BENCH_DIR or /tmp)."""
    root = base or os.environ.get("SHOPBOT_BENCH_DIR") or tempfile.gettempdir()
    return Path(tempfile.mkdtemp(prefix="shopbot-bench-", dir=root))


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def cleanup(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered) - 1e-9)))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float]) -> str:
    """median [min..max] of repeated runs."""
    return f"{median(values):,.0f} [{min(values):,.0f}..{max(values):,.0f}]"


PG_DSN = os.environ.get("SHOPBOT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def scratch_pg_database(dsn: str | None, purpose: str, keep: bool = False) -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the server at `dsn` (default $SHOPBOT_TEST_PG_DSN or the local one),
    dropped afterwards unless `keep`; yields its URL. The product migrates it on its first start."""
    import psycopg
    server = dsn or PG_DSN
    name = f"shopbot_bench_{purpose}_{os.getpid()}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        if keep:
            print(f"# kept the database {name}")
        else:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]
