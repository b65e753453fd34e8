"""`GET /metrics`: the bot's figures in Prometheus' text format (prometheus_client), for alerting.

Two sources, one page:
- the store, read on its read path at every scrape (`Store.metrics`, a deferred read transaction: never the write
  lock): counts by state, the oldest pending age, unknown items awaiting a decision, the per-minute counters, C14's
  λ, W and L over the stats window, the database size, and the turns that ended since the last scrape (their
  duration histogram and outcome counts, read by the `runs_ended` index);
- this process: model calls (latency histogram by outcome, tokens), relay sends (latency by outcome) and which parts
  run or stopped.

Every name starts with `shopbot_`. No label carries user data (no chat or sender ids, no texts, no till-made names,
no error texts): labels are states, kinds and outcomes made by the code, so cardinality stays bounded.
docs/operations.md lists every metric with what to alert on (tests/integration/test_metrics.py keeps that list in
step with this page).
"""
from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.relays.sender import TelegramSender
from store import MetricsSnapshot, RunOutcome, StateTallies, Store
from worker.models.base import ModelConfigFault, ModelRefused, ModelTransient

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TURN_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
STATS_WINDOW_S = 3600.0


class Metrics:
    """The registry behind /metrics: this process's instruments plus a collector of the store's figures."""

    def __init__(self, parts: Callable[[], dict[str, bool]] = dict, *, start_mark: datetime | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_calls = Histogram("shopbot_model_call_seconds", "Model calls by outcome, with their latency",
                                     ["outcome"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.model_tokens = Counter("shopbot_model_tokens", "Tokens the model read (input; cached: of those, served "
                                    "from the prompt cache) and wrote (output)",
                                    ["direction"], registry=self.registry)
        self.sends = Histogram("shopbot_relay_send_seconds", "Telegram sends by the relay, by outcome, with latency",
                               ["outcome"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.parts = parts
        self._figures: MetricsSnapshot | None = None
        self._turns: dict[str, int] = dict.fromkeys(RunOutcome, 0)
        self._turn_buckets = [0] * (len(TURN_BUCKETS) + 1)
        self._turn_sum = 0.0
        self._mark = start_mark
        self._seen_at_mark: set[str] = set()
        self._lock = asyncio.Lock()
        self._tallies: StateTallies = {}            # the store's counts of ended rows, advanced at each scrape
        self.registry.register(_StoreCollector(self))

    async def refresh(self, store: Store) -> None:
        """Read the store's figures and the turns ended since the last scrape (reads only)."""
        async with self._lock:
            if self._mark is None:
                self._mark = store.clock.now()
            figures = await store.metrics(STATS_WINDOW_S, self._tallies)
            while True:
                runs = await store.runs_ended_since(self._mark)
                fresh = [r for r in runs if r.run_id not in self._seen_at_mark]
                for run in fresh:
                    self._turns[run.outcome] += 1
                    seconds = max(0.0, (run.ended_at - run.started_at).total_seconds())
                    self._turn_sum += seconds
                    index = next((i for i, bound in enumerate(TURN_BUCKETS) if seconds <= bound), len(TURN_BUCKETS))
                    self._turn_buckets[index] += 1
                if runs:
                    last = runs[-1].ended_at
                    if last != self._mark:
                        self._mark, self._seen_at_mark = last, set()
                    self._seen_at_mark |= {r.run_id for r in runs if r.ended_at == last}
                if len(runs) < 10_000 or not fresh:
                    break
            self._figures = figures

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def observe_model(self, outcome: str, seconds: float, tokens_in: int = 0, tokens_out: int = 0,
                      tokens_cached: int = 0) -> None:
        self.model_calls.labels(outcome).observe(seconds)
        if tokens_cached:   # of the input tokens, those served from the provider's prompt cache
            self.model_tokens.labels("cached").inc(tokens_cached)
        if tokens_in:
            self.model_tokens.labels("input").inc(tokens_in)
        if tokens_out:
            self.model_tokens.labels("output").inc(tokens_out)

    def collect_store(self) -> Iterator[Metric]:
        figures = self._figures
        if figures is None:
            return
        work = GaugeMetricFamily("shopbot_work_items", "Work items by kind and state", labels=["kind", "state"])
        for (kind, state), n in sorted(figures.work.items()):
            work.add_metric([kind, state], n)
        yield work
        deliveries = GaugeMetricFamily("shopbot_deliveries", "Report parts by delivery state", labels=["state"])
        for state, n in figures.deliveries.items():
            deliveries.add_metric([state], n)
        yield deliveries
        actions = GaugeMetricFamily("shopbot_actions", "Supplier actions by state", labels=["state"])
        for state, n in figures.actions.items():
            actions.add_metric([state], n)
        yield actions
        yield GaugeMetricFamily("shopbot_oldest_pending_seconds", "Age of the oldest pending work item (0: none)",
                                value=figures.oldest_pending_seconds)
        waiting = GaugeMetricFamily("shopbot_unknown_awaiting_decision",
                                    "Unknown deliveries and actions waiting for a recorded decision", labels=["what"])
        waiting.add_metric(["delivery"], figures.deliveries.unknown)
        waiting.add_metric(["action"], figures.actions["unknown"])
        yield waiting
        counted = GaugeMetricFamily("shopbot_counted_per_minute",
                                    "Refusals, strangers and malformed input counted in the last complete minute",
                                    labels=["kind"])
        for kind, n in sorted(figures.counted_last_minute.items()):
            counted.add_metric([kind], n)
        yield counted
        stats = figures.stats
        yield GaugeMetricFamily("shopbot_stats_window_seconds", "The window of the λ, W and L figures",
                                value=stats.window_seconds)
        yield GaugeMetricFamily("shopbot_arrivals_per_second", "λ: agent work accepted per second over the window",
                                value=stats.lam)
        yield GaugeMetricFamily("shopbot_time_in_system_seconds", "W: mean time in system of the window's arrivals",
                                value=stats.w)
        yield GaugeMetricFamily("shopbot_open_work_mean", "L: time-average of open agent work over the window",
                                value=stats.l)
        turns = CounterMetricFamily("shopbot_turns", "Turns ended since this process started, by outcome",
                                    labels=["outcome"])
        for outcome, n in self._turns.items():
            turns.add_metric([outcome], n)
        yield turns
        cumulative, buckets = 0, []
        for bound, n in zip((*TURN_BUCKETS, float("inf")), self._turn_buckets):
            cumulative += n
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
        yield HistogramMetricFamily("shopbot_turn_seconds", "Duration of the turns ended since this process started",
                                    buckets=buckets, sum_value=self._turn_sum)
        size = GaugeMetricFamily("shopbot_database_bytes", "Size of the database and its write-ahead log",
                                 labels=["file"])
        size.add_metric(["main"], figures.db_bytes)
        size.add_metric(["wal"], figures.wal_bytes)
        yield size
        yield GaugeMetricFamily("shopbot_database_free_bytes", "Free pages inside the database file (reused first)",
                                value=figures.db_free_bytes)
        parts = GaugeMetricFamily("shopbot_part_up", "1 while a part of the bot runs, 0 once it stopped",
                                  labels=["part"])
        for part, up in sorted(self.parts().items()):
            parts.add_metric([part], 1 if up else 0)
        yield parts


class _StoreCollector:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self.metrics.collect_store()

    def describe(self) -> list[Metric]:
        return []


def metrics_route(store: Store, metrics: Metrics, token: str = "") -> Route:
    """`GET /metrics`; with `token` (SHOPBOT_METRICS_TOKEN) only for `Authorization: Bearer <token>` (compared in
    constant time), else 401."""
    expected = f"Bearer {token}".encode()

    async def page(request: Request) -> Response:
        if token and not hmac.compare_digest(request.headers.get("authorization", "").encode(), expected):
            return Response("unauthorized\n", status_code=401, media_type="text/plain",
                            headers={"WWW-Authenticate": "Bearer", "Cache-Control": "no-store"})
        await metrics.refresh(store)
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
    return Route("/metrics", page, methods=["GET"])


def model_outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    for kind, name in ((ModelConfigFault, "config_fault"), (ModelRefused, "refused"), (ModelTransient, "transient"),
                       (asyncio.CancelledError, "cancelled")):
        if isinstance(exc, kind):
            return name
    return "error"


class MeteredModel:
    """The model with every call timed and its tokens counted; everything else is the model's own."""

    def __init__(self, model: Any, metrics: Metrics) -> None:
        self._model = model
        self._metrics = metrics

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def complete(self, system: str, messages: Sequence[Any], tools: Sequence[Any]) -> Any:
        started = time.perf_counter()
        try:
            turn = await self._model.complete(system, messages, tools)
        except BaseException as exc:
            self._metrics.observe_model(model_outcome(exc), time.perf_counter() - started)
            raise
        self._metrics.observe_model("ok", time.perf_counter() - started, turn.input_tokens, turn.output_tokens,
                                    turn.cached_tokens)
        return turn


class MeteredSender(TelegramSender):
    """The relay's sender with every send timed by its outcome kind (confirmed, unknown, failed, ...)."""

    def __init__(self, bot: Any, metrics: Metrics) -> None:
        super().__init__(bot)
        self._metrics = metrics

    async def send(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            outcome = await super().send(*args, **kwargs)
        except BaseException:
            self._metrics.sends.labels("cancelled").observe(time.perf_counter() - started)
            raise
        self._metrics.sends.labels(outcome.kind).observe(time.perf_counter() - started)
        return outcome


__all__ = ["MeteredModel", "MeteredSender", "Metrics", "metrics_route"]
