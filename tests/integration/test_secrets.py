"""No secret in any record or message: a model server and a supplier whose 401 bodies repeat the credential they
refused. The key ends up in no database file (main file, -wal and -shm read as raw bytes), no CLI output and no
message at the Telegram Bot API (real App, real PTB client, fake Bot API, fake model server, local supplier)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bot.sandbox.local_setup import local_product, quiet_shop
from store import redaction
from tests.integration.test_actions import FAST, press, proposals_shown, rows, settled
from tests.support.fake_model_servers import FakeModelServer, openai_error

ROOT = Path(__file__).resolve().parents[2]
MODEL_KEY = "sk-test-PLANTEDkey0123456789abcdef"
SUPPLIER_TOKEN = "local-supplier-token"        # what bot/sandbox/local_setup.py configures


def files_of(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name) and p.is_file()}


def cli_outputs(db: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOPBOT_", "TELEGRAM_"))}
    env.update({"SHOPBOT_DB": str(db), "SHOPBOT_SHOP_FILE": str(quiet_shop(db.parent))})
    out = []
    for command in (["reports", "--limit", "100"], ["reports", "--json", "--limit", "100"], ["actions"],
                    ["status"], ["status", "--json"]):
        done = subprocess.run([sys.executable, "-m", "bot.cli", *command], capture_output=True, text=True, env=env,
                              timeout=60, cwd=db.parent)
        assert done.returncode == 0, done.stderr
        out.append(done.stdout + done.stderr)
    return "\n".join(out)


def telegram_traffic(run) -> str:
    return repr(run.api.sent) + repr(run.api.edited_markups) + repr(run.api.callback_answers)


def assert_nowhere(secret: str, run, *, seen_in_db: str) -> None:
    db = Path(run.app.cfg.db)
    assert rows(run, seen_in_db), "the planted fault did not happen"          # the control: the fault was recorded
    stored = files_of(db)
    assert {f"{db.name}-wal", db.name} <= set(stored)
    for name, data in stored.items():
        assert secret.encode() not in data, f"{secret} is in {name}"
    assert secret not in cli_outputs(db)
    assert secret not in telegram_traffic(run)


async def test_formerly_bug_a_model_key_echoed_in_a_401_is_stored_and_sent_nowhere():
    async with FakeModelServer([openai_error(401, f"Incorrect API key provided: {MODEL_KEY}. You can find "
                                                  "your API key at https://platform.example/account")] * 3) as model:
        async with local_product({**FAST, "SHOPBOT_MODEL": "openai:gpt-test", "SHOPBOT_MODEL_API_KEY": MODEL_KEY,
                                  "SHOPBOT_MODEL_BASE_URL": model.openai_base_url}) as run:
            await settled(run, "I had to stop my worker")
            [notice] = [m.text for m in run.owner_messages() if "I had to stop my worker" in m.text]
            assert "Incorrect API key provided: ****." in notice          # the detail is kept, the key is not
            assert_nowhere(MODEL_KEY, run, seen_in_db="SELECT 1 FROM reports WHERE body LIKE '%Incorrect API key%'")


async def test_a_model_key_echoed_in_a_refusal_is_not_in_the_error_report():
    """A 400 is a refusal of one request: the turn fails with an error report carrying the detail (no notice, no
    reason column: the report's own redaction is what keeps the key out)."""
    async with FakeModelServer([openai_error(400, f"invalid request for key {MODEL_KEY}")] * 5) as model:
        async with local_product({**FAST, "SHOPBOT_MODEL": "openai:gpt-test", "SHOPBOT_MODEL_API_KEY": MODEL_KEY,
                                  "SHOPBOT_MODEL_BASE_URL": model.openai_base_url}) as run:
            await settled(run, "the model refused this request")
            assert_nowhere(MODEL_KEY, run, seen_in_db="SELECT 1 FROM reports WHERE is_error = 1 AND body LIKE "
                                                      "'%invalid request for key ****%'")


async def test_formerly_bug_a_supplier_token_echoed_in_a_401_is_stored_and_sent_nowhere():
    async with local_product(FAST) as run:
        shown = await proposals_shown(run)
        run.supplier.inject("401_echo")
        press(run, shown["vanilla"], "Approve")
        await settled(run, "failed: the supplier refused the order")
        [reason] = rows(run, "SELECT reason FROM actions")
        assert reason == ("the supplier refused the order (401: unauthorized: Bearer **** is not a valid token)",)
        assert_nowhere(SUPPLIER_TOKEN, run, seen_in_db="SELECT 1 FROM actions WHERE reason LIKE '%401%'")


def test_error_details_lose_every_credential_shape_and_ordinary_reports_keep_their_words():
    redaction.register(["configured-secret-value"])
    for text, shown in [
        ("Incorrect API key provided: sk-proj-abcdefghijklmnop. See docs",
         "Incorrect API key provided: sk-****. See docs"),
        ("401: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "401: Bearer ****"),
        ('{"api_key": "a1b2c3d4e5"}', '{"api_key": "****"}'),
        ("bad token 123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef12", "bad token ****"),
        ("GET https://user:hunter22@host/x failed", "GET https://****@host/x failed"),
        ("refused configured-secret-value", "refused ****"),
    ]:
        assert redaction.error_detail(text) == shown
    # the negative control: an ordinary report keeps what looks like a key, and only configured secrets go
    ordinary = "order sk-2000 cones; Bearer of good news"
    assert redaction.secrets_only(ordinary) == ordinary
    assert redaction.secrets_only("it is configured-secret-value") == "it is ****"
