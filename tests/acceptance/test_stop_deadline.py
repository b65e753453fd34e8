"""K21 with a real process: a supplier that drips its answer a byte every 5 s (a per-read timeout never trips, and
the total deadline is set long here, 60 s) while `shopbot run` is told to stop: SIGTERM ends the process within the
stop deadline (10 s, exit 0) and the order in flight is left unknown, to be reconciled by its key (C11, C21).
The negative control is in the design: the test first waits until the drip holds the relay's request (the
supplier saw the POST and has not finished answering), so without `stop()` cancelling the call the process would
wait out the drip (about 150 s) and miss the deadline."""
from __future__ import annotations

import asyncio
import os
import stat

import pytest

from bot.sandbox.bot_api import LocalBotApi
from bot.sandbox.local_setup import quiet_shop  # the example shop, no brief at start
from bot.sandbox.supplier import LocalSupplier
from tests.support.proc import OWNER, Product

STOP_DEADLINE_S = 10.0


@pytest.fixture
async def api():
    async with LocalBotApi("778:stop-deadline-token") as server:
        yield server


async def test_sigterm_while_the_supplier_drips_exits_within_the_stop_deadline(tmp_path, api):
    async with LocalSupplier("supplier-token") as supplier:
        product = Product(tmp_path, api, SHOPBOT_SHOP_FILE=str(quiet_shop(tmp_path)),
                          SHOPBOT_SUPPLIER_URL=supplier.base_url, SHOPBOT_SUPPLIER_TOKEN="supplier-token",
                          SHOPBOT_SUPPLIER_TIMEOUT_S="60")
        supplier.inject("drip", delay=5.0)
        umask = os.umask(0o022)               # a permissive start, as outside systemd
        try:
            await product.start()
        finally:
            os.umask(umask)
        try:
            await api.wait_for(lambda: sum(m.text.startswith("Order proposal") for m in api.sent
                                           if m.chat_id == OWNER) == 2, timeout=30)
            card = next(m for m in api.sent if m.text.startswith("Order proposal")
                        and "vanilla" in m.text.splitlines()[0])
            api.post_callback(OWNER, OWNER, card.reply_markup["inline_keyboard"][0][0]["callback_data"],
                              card.message_id)
            await api.wait_for(lambda: ("POST" in [m for m, _ in supplier.requests]), timeout=30)
            await product.wait_db("SELECT state FROM actions", [("sending",)])    # the drip holds the request
            # and while it runs (started with the test's umask, made 022 below), its files are private: the WAL too
            files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir() if p.is_file()}
            assert {"shop.sqlite3", "shop.sqlite3-wal", "shopbot.log"} <= set(files), files
            assert all(mode == 0o600 for mode in files.values()), files
        except BaseException:
            await product.kill()
            raise
        assert product.proc is not None
        product.proc.send_signal(15)
        try:
            rc = await asyncio.wait_for(product.proc.wait(), STOP_DEADLINE_S)
        finally:
            await product.kill()           # only if it missed the deadline
        assert rc == 0
        assert product.query("SELECT state, reason FROM actions") == [("unknown", "stopped while sending")]
        assert len(supplier.orders) == 1          # the supplier has it: the restart finds it by its key
