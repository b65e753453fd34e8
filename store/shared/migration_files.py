"""Both dialects' numbered migration files (`NNNN_name.sql` in a package), read in order: one version numbering,
each dialect's SQL in its own package (store/sqlite/migrations, store/postgres/migrations)."""
from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def available(package: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration file of `package`, in order."""
    found = []
    for entry in resources.files(package).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [version for version, _, _ in found]
    if len(set(numbers)) != len(numbers) or (numbers and numbers[0] != 1):
        raise RuntimeError(f"migration numbers must start at 1 and never repeat: {numbers}")
    return found
