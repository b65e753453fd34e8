"""Without a PostgreSQL server the PostgreSQL tests are skipped with one line saying how to get one; with CI=true a
missing server fails the run (pytest in a child process, pointed at a port where nothing listens)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests.support import ROOT


def run_one_postgres_test(ci: bool) -> subprocess.CompletedProcess:
    with socket.socket() as s:          # a free port: nothing listens there once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOPBOT_") and k != "CI"}
    env["SHOPBOT_TEST_PG_DSN"] = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rs",
         "tests/contract/store/test_inbox_contract.py::test_an_empty_queue_claims_nothing"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_without_a_server_the_postgresql_tests_are_skipped_with_how_to_get_one():
    result = run_one_postgres_test(ci=False)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "1 passed, 1 skipped" in result.stdout
    assert "PostgreSQL tests skipped: no server at" in result.stdout and "SHOPBOT_TEST_PG_DSN" in result.stdout


def test_on_ci_a_missing_server_fails_the_run():
    result = run_one_postgres_test(ci=True)
    assert result.returncode != 0
    assert "cannot run on CI" in result.stdout
