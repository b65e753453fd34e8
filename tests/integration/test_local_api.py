"""The local fake Bot API, driven by the real PTB client over real HTTP on 127.0.0.1."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
import pytest
from telegram.error import BadRequest, Conflict, InvalidToken, NetworkError

from bot.sandbox.bot_api import FIRST_UPDATE_ID, LocalBotApi
from producers.telegram.client import make_bot
from tests.support import ROOT

TOKEN = "123456:TEST-token-for-local-api-0123456789abc"
CHAT = 4242


@pytest.fixture
async def api():
    async with LocalBotApi(TOKEN) as server:
        yield server


@pytest.fixture
async def bot(api):
    b = make_bot(TOKEN, api.base_url, read_timeout=3.0, connect_timeout=1.0)
    async with b:
        yield b


async def test_get_me_and_keep_alive(api, bot):
    me = await bot.get_me()
    assert (me.id, me.is_bot, me.username) == (999, True, "shopbot_local_bot")
    for i in range(5):
        await bot.send_message(CHAT, f"m{i}")
    assert api.connections_opened == 1  # initialize's getMe and every call since share one connection
    assert [m.message_id for m in api.sent] == [1, 2, 3, 4, 5]


async def test_update_is_redelivered_until_a_higher_offset_confirms_it(api, bot):
    first = api.post_message(CHAT, CHAT, "one")
    second = api.post_message(CHAT, CHAT, "two")
    assert (first["update_id"], second["update_id"]) == (FIRST_UPDATE_ID, FIRST_UPDATE_ID + 1)
    assert (first["message"]["message_id"], second["message"]["message_id"]) == (1, 2)

    batch = await bot.get_updates()
    assert [u.message.text for u in batch] == ["one", "two"]
    again = await bot.get_updates()  # not confirmed: delivered again
    assert [u.update_id for u in again] == [first["update_id"], second["update_id"]]
    assert again[0].message.chat.id == CHAT and again[0].message.from_user.id == CHAT

    rest = await bot.get_updates(offset=first["update_id"] + 1)  # confirms "one" only
    assert [u.message.text for u in rest] == ["two"]
    assert await bot.get_updates(offset=second["update_id"] + 1) == ()
    assert api.pending_updates == []
    assert api.offsets_requested == [None, None, first["update_id"] + 1, second["update_id"] + 1]
    assert api.confirmed_offset == second["update_id"] + 1


async def test_negative_offset_forgets_all_but_the_last(api, bot):
    for text in ("a", "b", "c"):
        api.post_message(CHAT, CHAT, text)
    assert [u.message.text for u in await bot.get_updates(offset=-1)] == ["c"]
    assert [u.message.text for u in await bot.get_updates()] == ["c"]


async def test_long_poll_returns_early_when_a_message_arrives(api, bot):
    loop = asyncio.get_running_loop()
    started = loop.time()
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await api.wait_for(lambda: len(api.offsets_requested) == 1)
    assert not poll.done()
    api.post_message(CHAT, CHAT, "hello")
    updates = await asyncio.wait_for(poll, 5)
    assert [u.message.text for u in updates] == ["hello"]
    assert loop.time() - started < 3


async def test_long_poll_waits_for_its_timeout_when_nothing_arrives(api, bot):
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await bot.get_updates(timeout=1) == ()
    assert 0.9 <= loop.time() - started < 3


async def test_limit_and_sticky_allowed_updates(api, bot):
    msg = api.post_message(CHAT, CHAT, "hi")
    sent = await bot.send_message(CHAT, "pick", reply_markup=None)
    api.post_edit(CHAT, CHAT, msg["message"]["message_id"], "hi (edited)")
    api.post_callback(CHAT, CHAT, "yes:abc", sent.message_id)
    api.post_message(CHAT, CHAT, "second")

    first = await bot.get_updates(limit=1, allowed_updates=["message", "callback_query"])
    assert [u.message.text for u in first] == ["hi"]
    batch = await bot.get_updates()  # allowed_updates is sticky
    assert [u.effective_message.text if u.message else u.callback_query.data for u in batch] == [
        "hi",
        "yes:abc",
        "second",
    ]
    everything = await bot.get_updates(allowed_updates=[])  # empty list: the default kinds again
    edit = [u for u in everything if u.edited_message]
    assert len(edit) == 1 and edit[0].edited_message.edit_date is not None
    assert edit[0].edited_message.message_id == msg["message"]["message_id"]


async def test_edits_of_one_message_get_increasing_edit_dates(api):
    msg = api.post_message(CHAT, CHAT, "x")["message"]
    dates = [api.post_edit(CHAT, CHAT, msg["message_id"], f"x{i}")["edited_message"]["edit_date"] for i in range(3)]
    assert dates == sorted(set(dates))


async def test_getupdates_conflicts_while_a_webhook_is_set(api, bot):
    api.post_message(CHAT, CHAT, "waiting")
    assert await bot.set_webhook("https://example.invalid/hook")
    assert (await bot.get_webhook_info()).url == "https://example.invalid/hook"
    with pytest.raises(Conflict, match="webhook is active"):
        await bot.get_updates()
    assert await bot.delete_webhook()
    info = await bot.get_webhook_info()
    assert info.url == "" and info.pending_update_count == 1
    assert [u.message.text for u in await bot.get_updates()] == ["waiting"]


async def test_injected_409_and_a_second_poller_conflict(api, bot):
    api.inject("getUpdates", "409")
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await bot.get_updates()

    first_poll = asyncio.create_task(bot.get_updates(timeout=10))
    await api.wait_for(lambda: api.calls.get("getUpdates") == 2)
    other = make_bot(TOKEN, api.base_url, read_timeout=3.0)
    async with other:
        assert await other.get_updates() == ()
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await asyncio.wait_for(first_poll, 5)


async def test_polls_are_recorded_per_client_and_an_overlap_is_a_conflict(api):
    """Several processes behind one server are told apart by `url_for`; a newer poll while an older client still
    listens is recorded as a conflict (two pollers at once: the check the multi-process tests rely on)."""
    one = make_bot(TOKEN, api.url_for("one"), read_timeout=3.0)
    two = make_bot(TOKEN, api.url_for("two"), read_timeout=3.0)
    async with one, two:
        await one.send_message(CHAT, "from one")
        assert await one.get_updates() == ()
        assert api.poll_conflicts == []                 # one poller after another: no overlap
        first_poll = asyncio.create_task(one.get_updates(timeout=10))
        await api.wait_for(lambda: len(api.polls_by("one")) == 2)
        assert api.polls[-1].outcome == "open"
        assert await two.get_updates() == ()            # the planted second poller
        with pytest.raises(Conflict):
            await asyncio.wait_for(first_poll, 5)
    assert [(p.client, p.outcome) for p in api.polls] == [("one", "empty"), ("one", "conflict"), ("two", "empty")]
    assert [(p.client, p.terminated_by) for p in api.poll_conflicts] == [("one", "two")]
    assert api.sent[0].client == "one" and api.polls[0].ended is not None
    assert api.polls[1].arrived <= api.polls[2].arrived <= api.polls[1].ended


async def test_a_poll_whose_client_went_away_is_abandoned_not_a_conflict(api):
    """A killed poller's open long poll ends when its connection closes; the next poller is no overlap."""
    port = api.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /dead/bot{TOKEN}/getUpdates?timeout=10 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    await api.wait_for(lambda: len(api.polls) == 1)
    writer.close()                                      # as the kernel does for a SIGKILLed process
    await api.wait_for(lambda: api.polls[0].outcome == "abandoned", timeout=2)
    live = make_bot(TOKEN, api.url_for("live"), read_timeout=3.0)
    async with live:
        assert await live.get_updates() == ()
    assert [(p.client, p.outcome) for p in api.polls] == [("dead", "abandoned"), ("live", "empty")]
    assert api.poll_conflicts == []


async def test_wrong_token_is_unauthorized(api):
    stranger = make_bot("654321:WRONG-token-0000000000000000000000", api.base_url)
    try:
        with pytest.raises(InvalidToken, match="rejected by the server"):
            await stranger.initialize()  # PTB wraps the 401 and puts the token into this message
        with pytest.raises(InvalidToken, match="Unauthorized"):
            await stranger.get_me()
    finally:
        await stranger.shutdown()
    async with httpx.AsyncClient() as client:
        r = await client.post(f"{api.base_url}/botnope/getMe")
    assert r.status_code == 401
    assert r.json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}


async def test_buttons_callbacks_and_markup_edits(api, bot):
    from telegram import InlineKeyboardButton, InlineKeyboardMarkup

    markup = InlineKeyboardMarkup([[InlineKeyboardButton("Resend", callback_data="resend:n1")]])
    message = await bot.send_message(CHAT, "r12.1 may not have arrived", reply_markup=markup)
    assert api.sent[-1].reply_markup == {"inline_keyboard": [[{"text": "Resend", "callback_data": "resend:n1"}]]}

    update = api.post_callback(CHAT, CHAT, "resend:n1", message.message_id)
    (parsed,) = await bot.get_updates()
    query = parsed.callback_query
    assert query.id == update["callback_query"]["id"] and query.data == "resend:n1"
    assert query.message.message_id == message.message_id and query.message.text == "r12.1 may not have arrived"

    assert await bot.answer_callback_query(query.id, text="Done")
    assert api.callback_answers == [{"callback_query_id": query.id, "text": "Done", "show_alert": False}]
    with pytest.raises(BadRequest, match="(?i)query is too old"):
        await bot.answer_callback_query(query.id, text="again")

    await bot.edit_message_reply_markup(chat_id=CHAT, message_id=message.message_id, reply_markup=None)
    assert api.edited_markups == [{"chat_id": CHAT, "message_id": message.message_id, "reply_markup": None}]
    with pytest.raises(BadRequest, match="(?i)not modified"):
        await bot.edit_message_reply_markup(chat_id=CHAT, message_id=message.message_id, reply_markup=None)
    with pytest.raises(BadRequest, match="(?i)message to edit not found"):
        await bot.edit_message_reply_markup(chat_id=CHAT, message_id=999, reply_markup=None)


async def test_chat_actions_commands_and_message_limits(api, bot):
    from telegram import BotCommand

    assert await bot.send_chat_action(CHAT, "typing")
    assert api.chat_actions == [{"chat_id": CHAT, "action": "typing"}]
    assert await bot.set_my_commands([BotCommand("status", "What is open"), BotCommand("pending", "Unsent")])
    assert [c["command"] for c in api.commands] == ["status", "pending"]
    assert [c.command for c in await bot.get_my_commands()] == ["status", "pending"]
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await bot.send_message(CHAT, "x" * 4097)
    with pytest.raises(BadRequest, match="(?i)text is empty"):
        await bot.send_message(CHAT, " ")
    await bot.send_message(CHAT, "x" * 4096)
    assert len(api.sent) == 1


async def test_form_strings_stay_strings_and_json_bodies_work(api):
    async with httpx.AsyncClient(base_url=f"{api.base_url}/bot{TOKEN}") as client:
        r = await client.post("/sendMessage", data={"chat_id": "7", "text": "42"})
        assert r.json()["result"]["text"] == "42"
        r = await client.post("/sendMessage", json={"chat_id": 7, "text": "true"})
        assert r.json()["ok"] and r.json()["result"]["message_id"] == 2
        r = await client.get("/getMe")
        assert r.json()["result"]["id"] == 999
        r = await client.post("/noSuchMethod")
        assert r.status_code == 404
    assert [(m.chat_id, m.text) for m in api.sent] == [(7, "42"), (7, "true")]


async def test_malformed_update_breaks_ptb_parsing_but_is_fetchable_raw(api, bot):
    api.post_raw_update({"message": {"message_id": 1, "chat": {"id": CHAT, "type": "private"}}})  # no date
    with pytest.raises(KeyError):
        await bot.get_updates()
    async with httpx.AsyncClient() as client:
        r = await client.post(f"{api.base_url}/bot{TOKEN}/getUpdates", data={"timeout": "0"})
    (raw,) = r.json()["result"]
    assert raw["update_id"] == FIRST_UPDATE_ID and "date" not in raw["message"]


async def test_redeliver_repeats_the_content_under_a_fresh_update_id(api, bot):
    original = api.post_message(CHAT, CHAT, "once")
    (u,) = await bot.get_updates()
    assert await bot.get_updates(offset=u.update_id + 1) == ()
    api.redeliver(original["update_id"])
    (dup,) = await bot.get_updates(offset=u.update_id + 1)
    assert dup.update_id != u.update_id
    assert (dup.message.chat.id, dup.message.message_id, dup.message.text) == (CHAT, u.message.message_id, "once")


async def test_wait_for_times_out_with_a_helpful_message(api):
    with pytest.raises(TimeoutError, match="still false after 0.2s.*sent\\(0\\)"):
        await api.wait_for(lambda: len(api.sent) == 1, timeout=0.2)


async def test_refuse_and_accept_keep_the_port(api, bot):
    port = api.port
    await api.refuse()
    with pytest.raises(NetworkError) as info:
        await bot.get_me()
    assert isinstance(info.value.__cause__, aiohttp.ClientConnectorError)
    await api.accept()
    assert api.port == port
    assert (await bot.get_me()).id == 999


# ---------------------------------------------------------------------- process mode


def _spawn(port: int, state: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.sandbox.bot_api", "--token", TOKEN, "--port", str(port), "--state", str(state)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, port


async def _listening_port(proc: subprocess.Popen) -> int:
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 10)
    assert line.startswith("local_api listening on http://127.0.0.1:"), line
    assert TOKEN not in line
    return int(line.rsplit(":", 1)[1])


async def _until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if await predicate():
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.02)


def _kill(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=10)
    return err


async def test_process_mode_survives_kill_9(tmp_path):
    state = tmp_path / "fake-telegram.sqlite"
    proc, _ = _spawn(0, state)
    stderr_all = ""
    try:
        port = await _listening_port(proc)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=5) as control:
            posted = (await control.post("/_control/message",
                                         json={"chat_id": CHAT, "user_id": CHAT, "text": "hi"})).json()
            bot = make_bot(TOKEN, base, read_timeout=3.0)
            async with bot:
                (update,) = await bot.get_updates()  # fetched, not confirmed
                assert update.update_id == posted["update_id"] and update.message.text == "hi"
                reply = await bot.send_message(CHAT, "hello Lucy")
                assert reply.message_id == 2  # the chat's counter is shared with the user's message
            state_before = (await control.get("/_control/state")).json()
            assert state_before["offsets_requested"] == [None]

        stderr_all += _kill(proc)
        proc, _ = _spawn(port, state)
        assert await _listening_port(proc) == port
        async with httpx.AsyncClient(base_url=base, timeout=5) as control:
            state_after = (await control.get("/_control/state")).json()
            assert [u["update_id"] for u in state_after["pending_updates"]] == [posted["update_id"]]
            sent = (await control.get("/_control/sent")).json()
            assert [(m["chat_id"], m["text"], m["message_id"]) for m in sent] == [(CHAT, "hello Lucy", 2)]

            bot = make_bot(TOKEN, base, read_timeout=3.0)
            async with bot:
                (again,) = await bot.get_updates()
                assert again.update_id == update.update_id and again.message.text == "hi"
                assert (await bot.send_message(CHAT, "next")).message_id == 3
                assert await bot.get_updates(offset=again.update_id + 1) == ()

                # user side and faults over /_control/
                r = await control.post("/_control/inject", json={"method": "sendMessage", "fault": "403"})
                assert r.json() == {"ok": True}
                with pytest.raises(Exception, match="blocked"):
                    await bot.send_message(CHAT, "refused")
                await control.post("/_control/refuse_for", json={"seconds": 0.5})
                await _until(lambda: _refused(base))
                await _until(lambda: _answers(base))
                assert (await bot.get_me()).id == 999

        stderr_all += _kill(proc)
        proc, _ = _spawn(port, state)
        await _listening_port(proc)
        async with httpx.AsyncClient(base_url=base, timeout=5) as control:
            state_last = (await control.get("/_control/state")).json()
            assert state_last["pending_updates"] == []
            assert state_last["confirmed_offset"] == update.update_id + 1
    finally:
        stderr_all += _kill(proc)
    assert TOKEN not in stderr_all


async def _refused(base: str) -> bool:
    async with httpx.AsyncClient() as client:
        try:
            await client.get(f"{base}/_control/state")
        except httpx.ConnectError:
            return True
    return False


async def _answers(base: str) -> bool:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{base}/_control/state")).status_code == 200


def test_cli_requires_a_token():
    r = subprocess.run(
        [sys.executable, "-m", "bot.sandbox.bot_api", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "SHOPBOT_LOCAL_API_TOKEN"},
        timeout=20,
    )
    assert r.returncode != 0 and "token" in r.stderr


async def test_state_survives_a_new_server_object(tmp_path):
    state = tmp_path / "s.sqlite"
    api = LocalBotApi(TOKEN, state_path=state)
    api.post_message(CHAT, CHAT, "kept")
    await api.stop()
    api2 = LocalBotApi(TOKEN, state_path=state)
    try:
        assert [u["message"]["text"] for u in api2.pending_updates] == ["kept"]
        assert json.loads(json.dumps(api2.state()))["pending_updates"][0]["update_id"] == FIRST_UPDATE_ID
        assert api2.post_message(CHAT, CHAT, "more")["message"]["message_id"] == 2
    finally:
        await api2.stop()
