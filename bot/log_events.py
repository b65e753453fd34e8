"""The stable event names of every log line the product writes (the `event` key of `SHOPBOT_LOG_FORMAT=json`).

One entry per logging call: event name -> (logger, message template). A name is stable: it is never renamed or
reused; a new call gets a new name here and a line in docs/operations.md (tests/test_logs.py finds every logging
call in the code and keeps this table and that list in step). Lines from libraries (uvicorn, APScheduler,
python-telegram-bot, httpx, warnings, asyncio) carry `lib.<top-level logger>`, e.g. `lib.uvicorn`, `lib.warnings`.
"""
from __future__ import annotations

EVENTS: dict[str, tuple[str, str]] = {
    # start, stop and configuration (bot/app.py, bot/cli)
    "run.starting": ("shopbot", "starting with database %s"),
    "app.database_opened": ("shopbot.app", "database %s (schema %d)"),
    "app.shop_seeded": ("shopbot.app", "shop seeded from %s: %d items"),
    "app.recovered": ("shopbot.app", "recovery: %d released, %d failed, %d deliveries now unknown"),
    "app.supplier_unset": ("shopbot.app",
                           "SHOPBOT_SUPPLIER_URL is not set: approved orders wait in the action outbox, none is sent"),
    "app.telegram_unreachable_at_start": ("shopbot.app",
                                          "Telegram is not reachable at start (%s); trying again in %.1f s"),
    "app.webhook_mode": ("shopbot.app", "webhook mode: Telegram posts to the configured URL"),
    "app.telegram_setup_failed": ("shopbot.app", "Telegram setup failed: %s"),
    "app.owner_chat_unwritable": ("shopbot.app",
                                  "cannot write to the owner chat %s (%s): the owner must open the bot in Telegram "
                                  "and press Start once; until then briefs and notices wait in the outbox"),
    "app.no_owners": ("shopbot.app", "SHOPBOT_OWNER_IDS is empty: every Telegram sender will be refused"),
    "app.part_stopped": ("shopbot.app", "%s stopped: %s"),
    "app.running": ("shopbot.app", "shopbot running: model=%s telegram=%s http=%s"),
    "app.stopped": ("shopbot.app", "shopbot stopped"),
    "app.lease_sweep": ("shopbot.app", "lease sweep: %d released, %d failed, %d deliveries now unknown"),
    "app.lease_sweep_failed": ("shopbot.app", "lease sweep failed (%s); trying again in %.1f s"),
    "app.retention_pruned": ("shopbot.app", "retention: pruned %s"),
    "app.retention_failed": ("shopbot.app", "retention failed (%s); the next daily run tries again"),
    # the HTTP server and the webhook
    "http.listening": ("shopbot.http", "http server listening on %s:%d"),
    "webhook.bad_secret": ("shopbot.http", "webhook call with a wrong or missing secret from %s"),
    "ops.login_refused": ("shopbot.http", "operator page: login refused from %s"),
    "webhook.admission_failed": ("shopbot.http", "webhook admission failed, answering 500 so Telegram retries: %s"),
    # Telegram ingestion (producers/telegram)
    "ingress.admission_failed": ("shopbot.ingress", "admission failed, batch not acknowledged (%s); retrying"),
    "ingress.batch_admitted": ("shopbot.ingress", "batch admitted updates=%d %s"),
    "ingress.chat_member": ("shopbot.ingress",
                            "chat member update chat=%s status=%s (a blocked bot cannot deliver to this chat)"),
    "ingress.conflicting_redelivery": ("shopbot.ingress",
                                       "conflicting redelivery source=%s: kept the first, refused this one"),
    "ingress.get_updates_failed": ("shopbot.ingress", "getUpdates failed (%s); retrying in %.1f s"),
    "ingress.flood_control": ("shopbot.ingress", "getUpdates flood control: waiting %.1f s"),
    "ingress.stale_poller_conflict": ("shopbot.ingress",
                                      "getUpdates 409 Conflict while holding the poller lease: a stale ex-leader's "
                                      "poll is still open; retrying in %.1f s"),
    "ingress.fence_refused": ("shopbot.ingress",
                              "admission refused by the poller lease fence: this poller stops, offset not advanced"),
    "ingress.malformed_update": ("shopbot.ingress", "malformed update dropped update_id=%s%s"),
    "ingress.refused_capacity": ("shopbot.ingress", "refused for capacity chat=%s source=%s"),
    "ingress.unsupported_update": ("shopbot.ingress", "unsupported update kind dropped update_id=%s"),
    "ingress.update_refused": ("shopbot.ingress", "update refused update_id=%s reason=%s sender=%s chat=%s"),
    # the till API
    "till.no_tokens": ("shopbot.till",
                       "no till tokens configured (SHOPBOT_TILL_TOKENS): every till request is answered 401"),
    "till.post": ("shopbot.till", "till post source=%s outcome=%s work_id=%s"),
    "till.read_failed": ("shopbot.till", "till read failed till=%s: %s"),
    "till.not_stored": ("shopbot.till",
                        "till request not stored till=%s, answering 500 so the till sends it again: %s"),
    "till.unauthorized": ("shopbot.till", "till request without a valid token from %s%s"),
    # the clock, the stock watcher and their scheduler
    "clock.admitted": ("shopbot.clock", "clock admitted source=%s fire_time=%s"),
    "clock.missed": ("shopbot.clock", "clock missed schedule=%s key=%s reason=%s"),
    "clock.refused_capacity": ("shopbot.clock", "clock refused for capacity source=%s: retried until its grace ends"),
    "stock.count_notice": ("shopbot.stock", "count notice admitted source=%s"),
    "stock.late_order_notice": ("shopbot.stock", "late order notice admitted source=%s"),
    "stock.episode_admitted": ("shopbot.stock", "stock episode admitted source=%s"),
    "stock.episode_refused_capacity": ("shopbot.stock",
                                       "stock episode refused for capacity source=%s: the item stays armed"),
    "scheduler.wakeup_crashed": ("shopbot.scheduler", "producer wake-up crashed job=%s: %r"),
    "scheduler.wakeup_failed": ("shopbot.scheduler",
                                "producer wake-up failed job=%s: %s (the next wake-up tries again)"),
    "scheduler.scheduled": ("shopbot.scheduler", "producer wake-ups scheduled: %s"),
    # the worker and the agent loop
    "worker.model_paused": ("shopbot.worker", "model failed %d times in a row: claiming paused for %.0f s"),
    "worker.model_refused": ("shopbot.worker", "model refused run_id=%s status=%s"),
    "worker.model_unusable": ("shopbot.worker", "model answer unusable run_id=%s: %s"),
    "worker.model_transient": ("shopbot.worker", "model transient failure run_id=%s status=%s %s"),
    "worker.turn_discarded": ("shopbot.worker", "turn discarded run_id=%s: %s"),
    "worker.turn_finished": ("shopbot.worker", "turn finished run_id=%s report_id=%s stop=%s"),
    "worker.turn_not_stored": ("shopbot.worker",
                               "turn run_id=%s could not be stored (%s); giving it back when the database recovers"),
    "worker.lease_lost": ("shopbot.worker",
                          "lease lost run_id=%s: %s; the turn is abandoned and nothing of it is written"),
    "worker.turn_started": ("shopbot.worker", "turn started run_id=%s session=%s work=%s attempt=%d"),
    "worker.database_unusable": ("shopbot.worker", "worker cannot use the database (%s); trying again in %.1f s"),
    "agent.unknown_tool": ("shopbot.agent", "model asked for unknown tool %r"),
    "agent.invalid_arguments": ("shopbot.agent", "model sent invalid arguments for %r: %s"),
    "agent.arguments_not_an_object": ("shopbot.agent", "model sent arguments that are not a JSON object for %r"),
    "agent.text_tool_calls": ("shopbot.agent", "model wrote %d tool call(s) as text; running them as calls"),
    "agent.call_looking_reply": ("shopbot.agent",
                                 "model reply looks like a tool call that cannot be read; asking once more"),
    # the report relay and its sender, the unknown notices
    "relay.delivered": ("shopbot.relay", "delivered %s message_id=%s"),
    "relay.denied": ("shopbot.relay", "delivery denied report_id=%s chat=%s"),
    "relay.refused": ("shopbot.relay", "delivery refused %s: %s"),
    "relay.unknown": ("shopbot.relay", "delivery unknown %s: %s (never resent without a decision)"),
    "relay.flood_control": ("shopbot.relay", "flood control %s: retry after %s s"),
    "relay.not_sent": ("shopbot.relay", "not sent, will retry %s: %s"),
    "relay.database_unusable": ("shopbot.relay", "relay cannot use the database (%s); trying again in %.1f s"),
    "sender.send_outcome": ("bot.relays.sender", "send to chat %s: %s (%s)"),
    "sender.edit_outcome": ("bot.relays.sender", "edit of message %s in chat %s: %s (%s)"),
    "typing.task_failed": ("shopbot.typing", "typing indicator task %s failed (best effort, ignored): %s: %s"),
    "sender.call_failed": ("bot.relays.sender", "%s failed: %s"),
    "sender.best_effort_failed": ("bot.relays.sender", "%s failed (best effort, ignored): %s"),
    "notices.unknown_announced": ("shopbot.notices", "unknown announced report_id=%s"),
    # the action relay (supplier orders)
    "actions.delivered": ("shopbot.actions", "action delivered action_id=%s order=%s"),
    "actions.failed": ("shopbot.actions", "action failed action_id=%s: %s"),
    "actions.not_sent": ("shopbot.actions", "action not sent action_id=%s: %s; retry in %.0f s"),
    "actions.quarantined": ("shopbot.actions", "action quarantined action_id=%s: %s"),
    "actions.reconciled_absent": ("shopbot.actions",
                                  "action reconciled action_id=%s: absent at the supplier, sending again"),
    "actions.reconciled_delivered": ("shopbot.actions", "action reconciled action_id=%s: delivered as %s"),
    "actions.database_unusable": ("shopbot.actions",
                                  "action relay cannot use the database (%s); trying again in %.1f s"),
    "actions.still_unknown": ("shopbot.actions", "action still unknown action_id=%s: %s"),
    "actions.unknown": ("shopbot.actions",
                        "action unknown action_id=%s: %s (reconciling by key, never resent blindly)"),
    # the PostgreSQL store: the LISTEN connection, commit outcomes read back (store/postgres)
    "listen.lost": ("shopbot.listen", "listen connection lost (%s); reconnecting in %.1f s, scanning meanwhile"),
    "listen.back": ("shopbot.listen", "listen connection back after a loss; full scan"),
    "store.commit_unknown": ("shopbot.store", "commit outcome unknown for %s (%s); reading it back from the records"),
    "store.commit_read_back": ("shopbot.store", "commit outcome of %s read back: %s"),
    "store.clock_off": ("shopbot.store", "this process's clock is %+.1f s off the database server's; times are "
                                         "stamped and leases judged on the server's clock"),
    # leader leases (bot/leadership.py, C16)
    "leader.acquired": ("shopbot.leadership", "leader acquired name=%s generation=%d holder=%s"),
    "leader.demoted": ("shopbot.leadership",
                       "leader demoted name=%s generation=%d: %s; the singleton stops at once"),
    "leader.resigned": ("shopbot.leadership", "leader resigned name=%s generation=%d"),
    "leader.call_failed": ("shopbot.leadership", "leader lease call failed name=%s (%s): counted as not held"),
    "leader.heartbeat_failed": ("shopbot.leadership", "heartbeat failed (%s); trying again"),
    # `shopbot run` itself
    "run.crashed": ("shopbot", "shopbot run stopped on an error: %s"),
    "run.drained": ("shopbot", "drained; left (not yet due): %s"),
    "run.refused": ("shopbot", "shopbot run refused to start: %s"),
    "run.stopped_during_start": ("shopbot", "stopped before the start completed; nothing was in flight"),
    "run.token_refused": ("shopbot", "configuration error: Telegram refused the bot token: check TELEGRAM_BOT_TOKEN "
                                     "(and TELEGRAM_API_BASE_URL)"),
}

# (logger, template) -> event, for the log filter's lookup
BY_TEMPLATE: dict[tuple[str, str], str] = {where: event for event, where in EVENTS.items()}
# The ids a JSON line carries when its message names them as `key=value` (or a record brings them in `extra`).
ID_KEYS = ("work_id", "report_id", "run_id", "update_id", "source", "action_id")
