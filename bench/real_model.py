"""A real model behind the OpenAI-compatible adapter, measured on the shop's questions (a benchmark, not a test).

    .venv/bin/python -m bench.real_model --base-url http://127.0.0.1:8090/v1 --model qwen [--limit N] [--verbose]

The shop is bench/agent_eval.py's, seeded the same way in a fresh SQLite file; the worker runs in this process with
the product's own agent loop, prompt, history (C17) and adapter (`openai:<model>` at the base URL, no key), one turn
at a time. The questions and their checker are bench/real_model_questions.py: 13 single questions, each in a chat of
its own, then one conversation of 10 turns in one chat. Per question this prints the time, the model calls, the tools
called, whether the answer is right (checked against the shop's records), the blanks ("—") in the reply, the prompt
tokens and of those the cached ones, whether the turn compacted the history (C17: it dropped an exchange the last
turn saw, so the prompt's prefix changed; SHOPBOT_HISTORY_TOKENS), and how many earlier exchanges the model saw of
those stored ("seen" 1/3) with their estimated tokens.
Totals: right, tool-call texts delivered to the owner (the target is 0), the cached share of the prompt tokens on the
conversation's follow-ups (turns that compacted reported apart), and whether turn 10 is right.

The server: llama.cpp's (bench/serve_gguf.py starts it from the xllamacpp wheel; docs/local-model.md).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.agent_eval import SHOP_FILE, seed
from bench.real_model_questions import CONVERSATION, SINGLE, Facts, Question, read_facts
from bot.shop_file import ShopSpec, load_shop
from store import Occurrence, SqliteStore, SystemClock
from worker import history as conversation
from worker.agent_loop import Limits
from worker.models import load_model
from worker.models.base import Message, ModelTurn, ToolSpec
from worker.text_calls import looks_like_tool_call
from worker.worker import Worker, WorkerSettings

DASH = "—"


@dataclass
class Call:
    seconds: float
    prompt: int
    cached: int
    said: str = ""       # what the model returned: its text and its structured calls (printed by --verbose)


class RecordingModel:
    """The adapter, with every call's time and prompt tokens (all, cached) recorded."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.name = model.name
        self.calls: list[Call] = []

    async def complete(self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelTurn:
        started = time.monotonic()
        turn: ModelTurn = await self._model.complete(system, messages, tools)
        said = " ".join([turn.text.strip(), *(f"[call {c.name} {c.arguments}]" for c in turn.tool_calls)]).strip()
        self.calls.append(Call(time.monotonic() - started, turn.input_tokens, turn.cached_tokens, said))
        return turn


@dataclass
class Result:
    n: int
    question: Question
    seconds: float
    calls: list[Call]
    tools: tuple[str, ...]
    reply: str
    prose: str
    right: bool
    compacted: bool                # this turn dropped an exchange the last one saw (C17): the prompt's prefix changed
    follow_up: bool
    seen: int = 0                  # earlier exchanges the model saw (those within SHOPBOT_HISTORY_TOKENS)
    stored: int = 0                # earlier exchanges stored (C17: an answer no tool backed leaves an empty one)
    seen_tokens: int = 0           # their estimated tokens (history.cost, what SHOPBOT_HISTORY_TOKENS counts)
    call_text: bool = False        # the reply delivered looks like a tool call
    failed: bool = False           # the turn ended with an error report
    notes: list[str] = field(default_factory=list)

    @property
    def prompt(self) -> int:
        return sum(c.prompt for c in self.calls)

    @property
    def cached(self) -> int:
        return sum(c.cached for c in self.calls)


def prose_of(body: str) -> str:
    """The reply without its Figures block (the part the model wrote, after C13)."""
    return body.split("\n\nFigures:")[0].split("\nFigures:")[0]


def _one(raw: Any, sql: str, *args: Any) -> Any:
    return raw.execute(sql, args).fetchone()


async def seeded_shop(tmp: str) -> tuple[Path, ShopSpec, SqliteStore]:
    """bench/agent_eval.py's shop seeded in a fresh SQLite file under `tmp`, its spec, and a store open on it."""
    db, shop_path = Path(tmp) / "bench.sqlite3", Path(tmp) / "shop.toml"
    shop_path.write_text(SHOP_FILE, encoding="utf-8")
    await seed(db, shop_path, datetime.now(UTC))
    return db, load_shop(shop_path), await SqliteStore.open(db, SystemClock(), debounce_ms=0)


def worker_settings(shop: ShopSpec, history_tokens: int, limits: Limits) -> WorkerSettings:
    """The worker's settings from the shop file, as the app builds them, with no backoff between tries."""
    return WorkerSettings(
        supplier=shop.supplier, currency=shop.currency, locale=shop.locale, shop_name=shop.name,
        hours=shop.hours, schedules=tuple((s.name, s.cron) for s in shop.schedules),
        shop_timezone=shop.timezone, order_max_cents=shop.order_max_cents, day_max_cents=shop.day_max_cents,
        history_tokens=history_tokens, limits=limits, backoff=(0.0,))


async def run_bench(base_url: str, model_name: str, *, limit: int | None = None, history_tokens: int = 2000,
                    turn_timeout_s: float = 600.0, model_timeout_s: float = 600.0, max_tokens: int = 1024,
                    verbose: bool = False, out: Any = sys.stdout, conversation_first: bool = False,
                    look_up: bool = False, only: Sequence[int] = ()) -> list[Result]:
    # chats of their own, away from the seeded owner's chat (OWNER_ID), which has the seed's conversation
    single: list[tuple[str, Question]] = [(f"tg:{5001 + i}", q) for i, q in enumerate(SINGLE)]
    talk: list[tuple[str, Question]] = [("tg:6000", q) for q in CONVERSATION]
    plan = talk + single if conversation_first else single + talk
    if only:
        plan = [plan[n - 1] for n in only]
    if limit is not None:
        plan = plan[:limit]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="shopbot-real-model-") as tmp:
        db, shop, store = await seeded_shop(tmp)
        model = RecordingModel(load_model(f"openai:{model_name}", base_url=base_url, timeout=model_timeout_s,
                                          max_tokens=max_tokens))
        settings = worker_settings(shop, history_tokens, Limits(max_seconds=turn_timeout_s, look_up=look_up))
        worker = Worker(store, model, settings)
        import sqlite3
        raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        cuts: dict[str, tuple[int, int]] = {}   # per chat, its last turn's cut and the exchanges stored then
        try:
            for n, (session, question) in enumerate(plan, start=1):
                stored = conversation.exchanges(await store.exchanges(session, settings.history_limit))
                follow_up = bool(stored)
                cut = conversation.cut(stored, history_tokens)
                last_cut, last_stored = cuts.get(session, (0, 0))
                # the prefix changed when this turn dropped an exchange the last turn saw (not only its own)
                compacted = any(stored[last_cut:min(cut, last_stored)])
                cuts[session] = cut, len(stored)
                before_calls = len(model.calls)
                proposals_before = {p.proposal_id for p in await store.open_proposals()}
                source = f"bench:{n}"
                await store.admit(Occurrence(source, session, question.text, destination=session))
                started = time.monotonic()
                await worker.drain()
                seconds = time.monotonic() - started
                row = _one(raw, "SELECT r.body, r.is_error, r.run_id FROM work w JOIN report_items ri ON ri.work_id = "
                                "w.work_id JOIN reports r ON r.report_id = ri.report_id WHERE w.source = ? "
                                "ORDER BY r.generation DESC LIMIT 1", source)
                body, is_error, run_id = row if row else ("(no report)", 1, None)
                tools = tuple(t for (t,) in raw.execute("SELECT tool FROM operations WHERE run_id = ? "
                                                        "ORDER BY op_id", (run_id,)))
                facts: Facts = await read_facts(store)
                facts.proposals_made = [p for p in await store.open_proposals()
                                        if p.proposal_id not in proposals_before]
                prose = prose_of(body)
                right = not is_error and question.check(prose, facts, tools)
                result = Result(n, question, seconds, model.calls[before_calls:], tools, body, prose, right,
                                compacted, follow_up, sum(bool(e) for e in stored[cut:]), sum(bool(e) for e in stored),
                                sum(conversation.cost(e) for e in stored[cut:]),
                                call_text=looks_like_tool_call(body) and not is_error,
                                failed=bool(is_error))
                results.append(result)
                print_row(result, out)
                if verbose or not right:
                    print(f"     asked: {question.text}\n     expected: {question.expects}\n     got: "
                          + prose.replace("\n", "\n          ")[:600], file=out)
                if verbose:
                    for k, call in enumerate(result.calls, start=1):
                        print(f"     model call {k} ({call.seconds:.1f} s): " + call.said.replace("\n", " ")[:400],
                              file=out)
                out.flush()
        finally:
            raw.close()
            await model._model.aclose()
            await store.close()
    return results


def print_header(out: Any) -> None:
    print(f"{'#':>2} {'category':<10} {'secs':>6} {'calls':>5} {'right':>5} {'blanks':>6} {'prompt':>7} "
          f"{'cached':>7} {'hist':>9} {'seen':>5} {'~tok':>5}  tools", file=out)


def print_row(r: Result, out: Any) -> None:
    hist = "compacted" if r.compacted else ("follow-up" if r.follow_up else "-")
    print(f"{r.n:>2} {r.question.category:<10} {r.seconds:>6.1f} {len(r.calls):>5} {'yes' if r.right else 'NO':>5} "
          f"{r.prose.count(DASH):>6} {r.prompt:>7} {r.cached:>7} {hist:>9} {f'{r.seen}/{r.stored}':>5} "
          f"{r.seen_tokens:>5}  {','.join(r.tools) or '-'}"
          + ("  (error report)" if r.failed else ""), file=out)


def summary(results: list[Result], history_tokens: int, out: Any) -> dict[str, Any]:
    def pct(a: float, b: float) -> str:
        return f"{100 * a / b:.0f} %" if b else "n/a"

    right = sum(r.right for r in results)
    follow = [r for r in results if r.follow_up and not r.compacted]
    compacted = [r for r in results if r.compacted]
    conv = [r for r in results if any(r.question is q for q in CONVERSATION)]
    figures = {
        "questions": len(results), "right": right,
        "tool_call_texts_delivered": sum(r.call_text for r in results),
        "error_reports": sum(r.failed for r in results),
        "blanks": sum(r.prose.count(DASH) for r in results),
        "follow_up_prompt": sum(r.prompt for r in follow), "follow_up_cached": sum(r.cached for r in follow),
        "compacted_prompt": sum(r.prompt for r in compacted), "compacted_cached": sum(r.cached for r in compacted),
        "turn_10_right": conv[9].right if len(conv) >= 10 else None,
        "seconds": sum(r.seconds for r in results),
    }
    print(file=out)
    print(f"right                       {right}/{len(results)} ({pct(right, len(results))})", file=out)
    print(f"tool-call texts delivered   {figures['tool_call_texts_delivered']}", file=out)
    print(f"error reports               {figures['error_reports']}", file=out)
    print(f"blanks in replies           {figures['blanks']}", file=out)
    print(f"cached on follow-ups        {figures['follow_up_cached']}/{figures['follow_up_prompt']} prompt tokens "
          f"({pct(figures['follow_up_cached'], figures['follow_up_prompt'])}) over {len(follow)} turns", file=out)
    print(f"cached on compacted turns   {figures['compacted_cached']}/{figures['compacted_prompt']} "
          f"({pct(figures['compacted_cached'], figures['compacted_prompt'])}) over {len(compacted)} turns "
          f"(SHOPBOT_HISTORY_TOKENS={history_tokens})", file=out)
    print(f"conversation turn 10 right  {figures['turn_10_right']}", file=out)
    print(f"model time                  {figures['seconds']:.0f} s", file=out)
    return figures


def main(argv: list[str] | None = None, out: Any = sys.stdout) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the OpenAI-compatible server's root, e.g. http://h:p/v1")
    parser.add_argument("--model", required=True, help="the model name the server expects")
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument("--history-tokens", type=int, default=2000, help="SHOPBOT_HISTORY_TOKENS (default 2000)")
    parser.add_argument("--turn-timeout", type=float, default=600.0, help="SHOPBOT_TURN_TIMEOUT_S (default 600)")
    parser.add_argument("--model-timeout", type=float, default=600.0, help="SHOPBOT_MODEL_TIMEOUT_S (default 600)")
    parser.add_argument("--max-tokens", type=int, default=1024, help="SHOPBOT_MODEL_MAX_TOKENS (default 1024)")
    parser.add_argument("--look-up", action="store_true", help="Limits.look_up: an answer with numbers and no tool "
                        "call is sent back once (off in the product)")
    parser.add_argument("--conversation-first", action="store_true", help="the 10-turn conversation before the rest")
    parser.add_argument("--verbose", action="store_true", help="print every reply")
    parser.add_argument("--only", default="", help="these questions only, by their numbers in the run's order "
                        "(comma-separated, e.g. 3,8,9), to measure a change on the questions it is about")
    args = parser.parse_args(argv)
    print(f"model {args.model} at {args.base_url}, SHOPBOT_HISTORY_TOKENS={args.history_tokens}, "
          f"SHOPBOT_MODEL_MAX_TOKENS={args.max_tokens}", file=out)
    print_header(out)
    results = asyncio.run(run_bench(args.base_url, args.model, limit=args.limit, history_tokens=args.history_tokens,
                                    turn_timeout_s=args.turn_timeout, model_timeout_s=args.model_timeout,
                                    max_tokens=args.max_tokens, verbose=args.verbose, out=out,
                                    conversation_first=args.conversation_first, look_up=args.look_up,
                                    only=[int(n) for n in args.only.split(",") if n.strip()]))
    figures = summary(results, args.history_tokens, out)
    return 0 if figures["tool_call_texts_delivered"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
