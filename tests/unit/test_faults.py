"""Fault points: parsing, and the `stop` action freezing a real process until SIGCONT."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from store import faults
from tests.support import ROOT

CHILD = """
import sys
from store import faults
faults.arm("K3:stop")
print("before", flush=True)
faults.reached("K3")
faults.reached("K3")          # disarmed after the first stop: runs on
print("resumed", flush=True)
"""


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_unknown_point_or_action_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault point"):
        faults.parse("K99:kill")
    with pytest.raises(ValueError, match="unknown action 'pause'"):
        faults.parse("K3:pause")
    assert faults.parse("K3:stop,K7:kill") == {"K3": "stop", "K7": "kill"}


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc (Linux)")
def test_stop_freezes_the_process_at_the_point_until_sigcont() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "before"
        deadline = time.monotonic() + 10
        while _state(child.pid) != "T":
            assert time.monotonic() < deadline, "the process never stopped at K3"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate(timeout=10)
        assert out.strip() == "resumed" and child.returncode == 0
    finally:
        if child.poll() is None:
            child.kill()
