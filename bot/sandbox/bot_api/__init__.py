"""A local fake of the Telegram Bot API on 127.0.0.1, for tests and `shopbot demo`.

The real client (python-telegram-bot over aiohttp, producers/telegram/transport.py) talks to it over real HTTP/1.1
with keep-alive, so PTB's own error mapping is exercised end to end. The server is written on `asyncio.start_server`
with a minimal HTTP/1.1 parser, which makes transport faults easy to produce: closing a connection after the request
was accepted, refusing the port, answering slowly, dribbling or hugely, answering with HTML.

Bot API (at `/bot<token>/<method>`, method names case-insensitive; any other token gets 401 Unauthorized):
`getMe`, `getUpdates` (real offset semantics, long poll, `limit`, sticky `allowed_updates`, 409 while a webhook is
set, and a long poll is terminated with 409 by a newer `getUpdates` as Telegram does), `sendMessage`,
`sendChatAction`, `answerCallbackQuery`, `setMyCommands`, `getMyCommands`, `editMessageReplyMarkup`,
`editMessageText` (400 "message is not modified" for the same content, as Telegram), `setMessageReaction` (a message
of the chat, at most one reaction per bot, only emoji of Telegram's list: 400 `REACTIONS_TOO_MANY` /
`REACTION_INVALID`; `reactions` holds each message's reaction now, `reaction_calls` every call), `sendMessageDraft`
(private chats only, a non-zero `draft_id`, 1-4096 characters: `drafts`), `setWebhook`, `deleteWebhook`,
`getWebhookInfo`. `parse_mode=HTML` is parsed as strictly as Telegram does (entities.py): an
unknown or unbalanced tag or a bad entity is 400 "can't parse entities"; `sent` keeps the visible text with its
entities and the HTML as sent. `reply_parameters` quotes a message of the chat (400 when it does not exist, unless
`allow_sending_without_reply`). Parameters are read from form-encoded bodies with JSON-encoded values (what PTB
sends), from JSON bodies and from the query string.

Several clients behind one server (processes sharing one bot token) are told apart by the root URL each is given:
`url_for(label)` is `base_url` + `/<label>`, and every call made through it carries the label (`polls`,
`SentMessage.client`, `by_caller`); Telegram itself has one URL, the label is the test's. Every processed
`getUpdates` is kept in `polls` (client, connection, offset, arrival and end on the loop's monotonic clock,
outcome): a poll ended with 409 by a newer one while its client still listened is a `conflict` (`poll_conflicts`:
two pollers at once); a poll whose client closed its connection (killed, or cancelled) is `abandoned` and no later
poll overlaps it.

The user side (`post_message`, `post_callback`, `post_edit`, `post_raw_update`, `redeliver`), the records of what
the bot did (`sent`, `chat_actions`, `timeline`: every call's arrival and answer in order, `by_caller`: every call
with who made it when a client's base URL ends in `/<caller>`, ...) and fault injection
(`inject`, `refuse`, `accept`) are Python methods; in process mode (`serve`, `python -m bot.sandbox.bot_api`) the
same operations are offered over HTTP under `/_control/`.

Fault semantics (each `inject` applies to the next `count` calls of one method, or of any method with "*"):

| fault              | effect on the call                                   | recorded (e.g. in `sent`)? |
|--------------------|------------------------------------------------------|----------------------------|
| drop_after_accept  | processed, then the connection closes, no reply      | yes                        |
| drop_before_accept | the connection closes, no reply                      | no                         |
| slow               | processed, the reply waits `delay` seconds           | yes (before the wait)      |
| non_json_200       | processed, answered 200 with an HTML body            | yes                        |
| 429                | 429 with `parameters.retry_after`                    | no                         |
| 400 / 403          | "Bad Request: chat not found" / "Forbidden: bot was blocked by the user" | no     |
| 401                | "Unauthorized" (the token refused for this call only; `revoke_token` refuses it for good) | no |
| 500 / 502_html     | 500 JSON error / 502 with an nginx HTML page         | no                         |
| 409                | "Conflict: terminated by other getUpdates request"  | no                         |
| huge_200           | processed, answered 200 with 17 MiB of JSON and no Content-Length | yes           |
| dribble            | processed, the reply written one byte every `delay` s (default 0.2) | yes         |

Flood control: with `flood_per_s` (`--flood-per-s`) sendMessage is answered 429 (`retry_after` 1) when it would
overflow a bucket of `flood_burst` calls (`--flood-burst`, default one second's worth) draining at that rate over all
chats (Telegram's limit as python-telegram-bot models it); `state()["flood_refused"]` counts them. Off by default.

Persistence: with `state_path` (a SQLite file owned by the server) every update (pending and confirmed), the
confirmed offset, sent messages, message-id counters, callback queries, webhook, commands and the logs survive a
kill -9 of the server; each change commits before the HTTP reply that reveals it is written.

The server never logs requests and never prints the token.

Modules: `state` holds the records, the update queue and the SQLite state file (`ApiState`, `SentMessage`);
`faults` the known faults and the queue of injected ones (`FAULTS`, `FaultPlan`); `methods` the Bot API handlers
and the parameter/reply helpers; `server` the HTTP server `LocalBotApi` (listener, dispatch, user side, control
endpoints) with `serve` and `main`; `__main__` the process entry point.
"""
from __future__ import annotations

from bot.sandbox.bot_api.faults import FAULTS
from bot.sandbox.bot_api.server import LocalBotApi, main, serve
from bot.sandbox.bot_api.state import FIRST_UPDATE_ID, SentMessage

__all__ = ["FAULTS", "FIRST_UPDATE_ID", "LocalBotApi", "SentMessage", "main", "serve"]
