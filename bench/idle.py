"""Idle cost (issue 8, item 4): CPU and wake-ups of `shopbot run` over 60 s with nothing to do (long polling against
the local Bot API server only), and its resident memory with SHOPBOT_MODEL=offline.

    python -m bench.idle [--seconds 60]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import machine

ROOT = Path(__file__).resolve().parent.parent


def proc_stat(pid: int) -> tuple[float, int, int]:
    """(CPU seconds, voluntary + involuntary context switches, resident KiB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    switches, rss = 0, 0
    for task in Path(f"/proc/{pid}/task").iterdir():          # every thread (aiosqlite, uvicorn)
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                switches += int(line.split()[1])
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            rss = int(line.split()[1])
    return cpu, switches, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    for key, value in machine().items():
        print(f"{key}: {value}")
    token = "5151:idle-bench"
    with tempfile.TemporaryDirectory(prefix="shopbot-idle-") as tmp:
        api = subprocess.Popen([sys.executable, "-m", "bot.sandbox.bot_api", "--token", token, "--port", "0"],
                               stdout=subprocess.PIPE, text=True)
        base = api.stdout.readline().strip().rsplit(" ", 1)[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
        env.update({"SHOPBOT_DB": str(Path(tmp) / "idle.sqlite3"), "TELEGRAM_BOT_TOKEN": token,
                    "TELEGRAM_API_BASE_URL": base, "SHOPBOT_OWNER_IDS": "1001", "SHOPBOT_MODEL": "offline",
                    "SHOPBOT_SHOP_FILE": str(ROOT / "tests" / "support" / "data" / "shop_calm.toml"),
                    "SHOPBOT_HTTP_PORT": "0",
                    "SHOPBOT_LOG_LEVEL": "WARNING"})
        bot = subprocess.Popen([sys.executable, "-m", "bot.cli", "run"], env=env, cwd=tmp,
                               stderr=subprocess.DEVNULL)
        try:
            time.sleep(5)                                        # start-up done, first long poll in flight
            cpu0, sw0, _ = proc_stat(bot.pid)
            start = time.monotonic()
            time.sleep(args.seconds)
            elapsed = time.monotonic() - start
            cpu1, sw1, rss = proc_stat(bot.pid)
        finally:
            bot.terminate()
            bot.wait(15)
            api.kill()
            api.wait()
    cpu_share = (cpu1 - cpu0) / elapsed
    print(f"idle for {elapsed:.0f} s: CPU {cpu_share:.2%} of one core (target < 1%), "
          f"{(sw1 - sw0) / elapsed:.1f} wake-ups/s (context switches, all threads), resident memory "
          f"{rss / 1024:.1f} MiB (target < 100 MB)")


if __name__ == "__main__":
    main()
