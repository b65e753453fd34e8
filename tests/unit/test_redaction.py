"""The one set of redaction rules (store/redaction.py): linear on hostile text, every rule still masking, outside
text cut before it is redacted (never leaving the start of a secret cut in two), control characters stripped; the
log filter redacts each record once, one line, at most 10,000 characters."""
from __future__ import annotations

import logging
import time

import pytest

from bench.redaction import OLD, shapes
from bot import logs
from store import redaction

SECRET = "a-configured-secret-value"
GENEROUS_S = 3.0      # a deadline, not a speed target (bench/redaction.py records the times); the old rules: minutes


@pytest.fixture(autouse=True)
def secrets():
    redaction.register([SECRET])
    yield
    redaction.forget_all()


@pytest.mark.parametrize("shape", sorted(shapes(10)))
def test_an_uncut_megabyte_of_hostile_text_is_redacted_within_a_generous_deadline(shape):
    text = shapes(1_000_000)[shape] + f" token 123456:{'A' * 35} and {SECRET}"
    start = time.perf_counter()
    out = redaction.outside(text, len(text))
    assert time.perf_counter() - start < GENEROUS_S
    assert "A" * 35 not in out and SECRET not in out and out.endswith(f"token {redaction.MASK} and {redaction.MASK}")


def test_the_shapes_are_the_old_patterns_worst_case():
    """The control: on these shapes the old patterns scan from every start position (a 4x longer text, about 16x
    the steps); shown by counting, not timing: every letter of the run was a start that could reach '://'."""
    text = shapes(2_000)["letters"] + "://u:p@h"
    assert OLD[0].search(text).start() == 0          # the whole 2,000-letter run is one 'scheme'
    assert redaction.redact(text) == text.replace("://u:p@h", "://****@h")


@pytest.mark.parametrize(("text", "shown"), [
    ("https://user:pass@host/x", "https://****@host/x"),
    ("x" * 40 + "://user:pass@host", "x" * 40 + "://****@host"),         # a scheme of any length
    ("bot123456789:AAH" + "x" * 32 + "/getMe", "bot****/getMe"),           # a token after letters (no anchor before)
    ("Incorrect API key provided: sk-proj-abcdef123456", "Incorrect API key provided: sk-****"),
    ("Authorization: Bearer abcdef123456", "Authorization: Bearer ****"),
    ('{"api_key": "abcd1234"}', '{"api_key": "****"}'),
    (f"the {SECRET} here", "the **** here"),
])
def test_every_rule_still_masks(text, shown):
    assert redaction.redact(text) == shown


def test_outside_text_is_cut_first_and_a_secret_cut_in_two_is_masked_whole():
    text = "x" * 95 + SECRET
    out = redaction.outside(text, 100)
    assert "a-con" not in out and out.startswith("x" * 95) and len(out) <= 100 + len(redaction.MASK) + 1
    assert redaction.outside("y" * 50_000, 100) == "y" * 100 + "…"


def test_control_characters_and_forged_lines_are_stripped():
    out = redaction.outside("refused\n2026-12-02 INFO shopbot.app forged line\r\x1b[2J\u202eevil\x00")
    assert "\n" not in out and "\r" not in out and "\x1b" not in out and "\u202e" not in out and "\x00" not in out
    assert out.startswith("refused 2026-12-02 INFO")


def test_a_log_record_is_one_line_of_at_most_10000_characters_redacted_once(tmp_path):
    logger = logging.getLogger("shopbot.test_redaction")
    log_file = tmp_path / "x.log"
    root = logging.getLogger()
    saved = list(root.handlers)
    logs.setup_logging("INFO", [], log_file)
    calls: list[str] = []
    real = redaction.redact

    def counting(text: str) -> str:
        calls.append(text)
        return real(text)
    try:
        redaction.redact, logs.redact = counting, counting           # type: ignore[assignment]
        logger.warning("supplier said %s", "bad\nFORGED " + "z" * 1_000_000 + SECRET)
    finally:
        redaction.redact, logs.redact = real, real                   # type: ignore[assignment]
        for handler in list(root.handlers):
            if handler not in saved:
                root.removeHandler(handler)
                handler.close()
    lines = log_file.read_text().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 10_000 and "FORGED" in lines[0]
    assert len(calls) == 1                 # two handlers (stderr and the file), one redaction of the record


def test_a_json_line_with_a_long_traceback_stays_under_10000_characters():
    formatter = logs.JsonFormatter()
    try:
        raise RuntimeError("\n".join("x" * 50 for _ in range(2_000)))
    except RuntimeError:
        import sys
        record = logging.LogRecord("shopbot.test", logging.ERROR, __file__, 1, "y" * 20_000, None, sys.exc_info())
    logs.RedactingFilter().filter(record)
    line = formatter.format(record)
    assert len(line) <= 10_000 and '"exc": "Traceback' in line and len(record.exc_text or "") > 3_000   # it was long
