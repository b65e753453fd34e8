"""Shared test helpers: the repository's paths, the real-process harness (proc), the outside audit (audit), the
scripted model servers, hypothesis strategies, and the shop files in data/."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
