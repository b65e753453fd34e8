"""Poller failover (issue 19): `python -m bench.failover [--trials 20] [--lease 2] [--processes 3] [--dsn URL]`.

N real `shopbot run` processes on one scratch PostgreSQL database behind one local Bot API (each process with its
own labelled root URL, so the server knows who polled). Each trial ends the process holding the poller lease and
measures, from the server's own getUpdates record:

- gap: the end of the old leader's last getUpdates (its client gone: killed, or its poll cancelled on a clean
  stop) to the arrival of the new leader's first getUpdates: the time nobody polled;
- since the signal: the SIGKILL or SIGTERM to the new leader's first getUpdates.

`--trials` trials after SIGKILL (target: at most the lease plus one renewal period, lease + lease/3), then as many
after SIGTERM (the leader resigns on a clean stop; target: at most 1 s). After each trial a new process starts, so
N stay up. Every trial also checks that the server never saw two pollers at once (a getUpdates ended by a newer one
while its own client still listened). Prints p50 / p99 / max of each and exits 1 when a target is missed or two
pollers were seen.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import cleanup, pct, print_machine, scratch_dir, scratch_pg_database  # noqa: E402
from bot.sandbox.bot_api import LocalBotApi  # noqa: E402
from tests.support.cluster import Cluster, Takeover, overlaps, takeover  # noqa: E402

TOKEN = "777:failover-token"


async def trial(api: LocalBotApi, cluster: Cluster, how: str, lease: float, base: str) -> Takeover:
    leaders = await cluster.wait_leaders(timeout=lease * 4 + 20)
    old = leaders["poller"]
    await api.wait_for(lambda: any(p.client == old.label for p in api.polls), timeout=lease * 4 + 10)
    await asyncio.sleep(0)
    event_at = time.monotonic()
    if how == "kill":
        await cluster.kill(old)
        seen = await takeover(api, old, event_at, timeout=lease * 4 + 10)
    else:
        stopping = asyncio.ensure_future(cluster.terminate(old))
        seen = await takeover(api, old, event_at, timeout=lease * 4 + 10)
        rc = await stopping
        if rc != 0:
            raise AssertionError(f"{old.label} exited {rc} on SIGTERM: {old.output()[-2000:]}")
    member = await cluster.start(base)
    await cluster.wait_until(lambda: cluster.holder_of(member), 30, f"{member.label} registered")
    return seen


def figures(name: str, values: list[float], target: float) -> tuple[str, bool]:
    ok = pct(values, 99) <= target
    return (f"{name:34} p50 {pct(values, 50):6.3f} s   p99 {pct(values, 99):6.3f} s   max {max(values):6.3f} s   "
            f"(n={len(values)}; target <= {target:.3f} s: {'meets' if ok else 'MISSED'})"), ok


async def amain(args: argparse.Namespace) -> int:
    print_machine()
    work = scratch_dir(args.dir)
    lease = args.lease
    results: dict[str, list[Takeover]] = {"kill": [], "term": []}
    try:
        with scratch_pg_database(args.dsn, "failover") as url:
            async with LocalBotApi(TOKEN) as api:
                cluster = Cluster(work, api, url, lease_s=lease)
                try:
                    bases = [chr(ord("a") + i) for i in range(args.processes)]
                    for base in bases:
                        await cluster.start(base)
                    await cluster.wait_leaders(timeout=60)
                    started_up = time.monotonic()
                    for how in ("kill", "term"):
                        for n in range(args.trials):
                            base = bases[n % len(bases)]
                            seen = await trial(api, cluster, how, lease, base)
                            results[how].append(seen)
                            if args.verbose:
                                print(f"  {how} {n + 1}: {seen.old} -> {seen.new}  gap {seen.gap:.3f} s, "
                                      f"since the signal {seen.since_event:.3f} s", flush=True)
                    two = overlaps(api, since=started_up)
                    codes = await cluster.terminate_all()
                finally:
                    await cluster.kill_all()
    finally:
        cleanup(work)
    renewal = lease / 3
    print(f"# lease {lease:g} s, renewal every {renewal:.3f} s, {args.processes} processes, {args.trials} trials each")
    ok = True
    for line, good in (
        figures("SIGKILL: gap (last poll -> first)", [t.gap for t in results["kill"]], lease + renewal),
        figures("SIGKILL: signal -> first poll", [t.since_event for t in results["kill"]], lease + renewal),
        figures("SIGTERM: gap (last poll -> first)", [t.gap for t in results["term"]], 1.0),
        figures("SIGTERM: signal -> first poll", [t.since_event for t in results["term"]], 1.0),
    ):
        print(line)
        ok = ok and good
    print(f"two pollers at once: {len(two)}; exit codes on the final SIGTERM: {sorted(set(codes.values()))}")
    ok = ok and not two and set(codes.values()) == {0}
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials after SIGKILL, and as many after SIGTERM")
    parser.add_argument("--lease", type=float, default=2.0, help="SHOPBOT_LEASE_S of every process")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--dsn", default=None, help="a PostgreSQL server (default: $SHOPBOT_TEST_PG_DSN or "
                        "postgresql://postgres@127.0.0.1:5432/postgres); a scratch database is made and dropped")
    parser.add_argument("--dir", default=None, help="where the processes' logs go while it runs")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per trial")
    return asyncio.run(amain(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
