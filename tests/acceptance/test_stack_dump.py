"""`kill -USR1` on `shopbot run` prints every thread's stack on stderr, and the process goes on and stops cleanly
after: how an operator, and a test whose process does not stop after SIGTERM, sees where it hangs
(tests/support/proc.py `Product.stop` adds the dump to its failure). Without the handler, SIGUSR1's default action
ends the process, and this test fails."""
from __future__ import annotations

import signal

import pytest

from bot.sandbox.bot_api import LocalBotApi
from tests.support.proc import OWNER, Product

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 on this platform")


@pytest.fixture
async def api():
    async with LocalBotApi("778:stack-dump-token") as server:
        yield server


async def test_sigusr1_prints_every_threads_stack_and_the_process_goes_on(tmp_path, api):
    product = Product(tmp_path, api)
    await product.start()
    try:
        api.post_message(OWNER, OWNER, "help")
        await api.wait_for(lambda: any(m.chat_id == OWNER for m in api.sent), timeout=30)  # running, answering
        stacks = await product.stacks()
        assert product.proc is not None and product.proc.returncode is None, stacks   # it goes on
        assert "Current thread 0x" in stacks and "(most recent call first)" in stacks, stacks
        assert "base_events.py" in stacks, stacks            # the event loop's thread, where it waits
        assert "_connection_worker_thread" in stacks, stacks   # the database connection's thread too: all threads
        api.post_message(OWNER, OWNER, "help")              # and it still answers after the dump
        await api.wait_for(lambda: sum(m.chat_id == OWNER for m in api.sent) >= 2, timeout=30)
    except BaseException:
        await product.kill()
        raise
    assert await product.stop() == 0
