"""Every `python -m bench.<name>` still starts and finishes at its smallest size (issue 31: benchmarks that
reproduce). A bench that no longer starts (stricter settings, a changed signature) fails here, not on the day its
figures are needed. No time is asserted: these are the commands, not the measurements.

A new bench module must be listed in SMALLEST (or HELPERS when it is not a command); the listing is checked.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

# the smallest arguments at which each bench still does all of its steps (about 60 s for all of them together)
SMALLEST: dict[str, tuple[str, ...]] = {
    "admission_backlog": ("--backlog", "100", "--admits", "20", "--rounds", "1"),
    "agent_eval": (),
    "burst_admission": ("--runs", "1", "--updates", "200", "--no-profile"),
    "burst_ingress": ("--updates", "200", "--repeats", "1"),
    "conversation_setup": ("--exchanges", "5", "--turns", "10", "--repeats", "1"),
    "disk_floor": ("--runs", "1", "--commits", "50", "--admits", "50"),
    "failover": ("--trials", "1", "--processes", "2"),
    "flood": ("--messages", "10", "--chats", "5", "--repeats", "1"),
    "history_scale": ("--history", "1000", "--ops", "10", "--fix-ops", "10", "--rounds", "1"),
    "idle": ("--seconds", "1"),
    "latency": ("--messages", "5", "--chats", "5", "--rate", "50", "--repeats", "1"),
    "leader_fence": ("--commits", "50"),
    "metrics_scrape": ("--history", "200", "--rounds", "1"),
    "model_efficiency": ("--messages", "2"),
    "mutations": ("--only", "DST"),
    "redaction": ("--sizes", "0.01", "--old-kb", "1"),
    "retention_year": ("--items", "200"),
    "scale_out": ("--processes", "1", "--window", "1", "--warmup", "0.5"),
    "seed_tables": ("--extra-seeds", "0", "--ticks", "1100", "--model-seeds", "5", "--reports", "200",
                    "--sample", "50", "--no-plots", "--no-condition"),
    "soak": ("--minutes", "0.1"),
    "store_backends": ("--items", "20", "--repeats", "1"),
    "throughput": ("--items", "50", "--saturate", "5", "--repeats", "1", "--anatomy"),
}
# benches run elsewhere: the reason is printed as the skip
ELSEWHERE = {"real_model": "the real-model bench: its own test runs it against the scripted model server",
             "real_model_turn2": "a probe of one request against a real model server (bench/RESULTS.md)",
             "real_model_echo": "a probe of the echo round against a real model server; its requests are built in "
                                "tests/integration/test_real_model_bench.py",
             "serve_gguf": "serves a GGUF on llama.cpp from the xllamacpp wheel, outside the project's virtualenv"}
# modules of bench/ that are not commands (no `__main__`)
HELPERS = {"__init__", "common", "eval_model_server", "soak_postgres", "real_model_questions"}


def _modules() -> list[str]:
    return sorted(p.stem for p in BENCH.glob("*.py") if p.stem not in HELPERS)


def test_every_bench_module_is_listed_and_every_helper_is_not_a_command() -> None:
    unlisted = [m for m in _modules() if m not in SMALLEST and m not in ELSEWHERE]
    assert unlisted == [], f"bench modules with no smallest size in this test: {unlisted}"
    commands = [h for h in HELPERS - {"__init__"} if 'if __name__ == "__main__"' in (BENCH / f"{h}.py").read_text()]
    assert commands == [], f"helpers that are commands (list them in SMALLEST): {commands}"


@pytest.mark.parametrize("name", _modules())
def test_bench_runs_at_its_smallest_size(name: str, tmp_path: Path) -> None:
    if name in ELSEWHERE:
        pytest.skip(ELSEWHERE[name])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    env.update({"SHOPBOT_BENCH_DIR": str(tmp_path), "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)})
    if name == "throughput" and importlib.util.find_spec("huey") is None:
        print("huey is not installed (the `bench` extra): bench.throughput prints its line and skips the anchor")
    done = subprocess.run([sys.executable, "-m", f"bench.{name}", *SMALLEST[name]], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, f"bench.{name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"bench.{name} printed nothing"
