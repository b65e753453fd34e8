"""The real-model conversation's second turn, alone: does the model call a tool for a follow-up, and does
`tool_choice` change that? (bench/RESULTS.md, "A real local model"; a probe, not a test.)

    .venv/bin/python -m bench.real_model_turn2 --base-url http://127.0.0.1:8090/v1 --model qwen auto required

Turn 1 ("How much strawberry do we have?") is scripted as the product stores it (C17): the model's get_item call,
the tool's real result from bench/agent_eval.py's seeded shop, and the answer "We have N tubs of strawberry on
hand." with the records' N. The product's worker builds turn 2's request ("And chocolate?": the system prompt, the
tools, that history, the turn head); it is then sent to the server once per `tool_choice` value given ("auto" sends
none), and the reply, its structured calls and the tool calls read from its text (worker/text_calls.py) are printed.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from bench.real_model import seeded_shop, worker_settings
from bench.real_model_questions import read_facts
from store import Occurrence
from worker.agent_loop import Limits
from worker.models.base import Message, ModelTurn, ToolCall, ToolSpec
from worker.models.openai_chat import OpenAIChatModel
from worker.text_calls import text_calls
from worker.worker import Worker


class Scripted:
    """Turn 1's call and answer; every request is kept (the third is turn 2's)."""
    name = "openai:scripted"

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = turns
        self.requests: list[tuple[str, tuple[Message, ...], tuple[ToolSpec, ...]]] = []

    async def complete(self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelTurn:
        self.requests.append((system, tuple(messages), tuple(tools)))
        return self.turns.pop(0)


async def turn_two_request() -> tuple[str, tuple[Message, ...], tuple[ToolSpec, ...]]:
    with tempfile.TemporaryDirectory(prefix="shopbot-turn2-") as tmp:
        _, shop, store = await seeded_shop(tmp)
        try:
            n = (await read_facts(store)).items["strawberry"].on_hand
            model = Scripted([ModelTurn("", (ToolCall("call_1", "get_item", '{"item": "strawberry"}'),)),
                              ModelTurn(f"We have {n} tubs of strawberry on hand.", ()), ModelTurn("-", ())])
            worker = Worker(store, model, worker_settings(shop, 2000, Limits(max_seconds=600.0)))
            for n_, text in enumerate(("How much strawberry do we have?", "And chocolate?")):
                await store.admit(Occurrence(f"turn2:{n_}", "tg:6000", text, destination="tg:6000"))
                await worker.drain()
        finally:
            await store.close()
    return model.requests[2]


async def probe(base_url: str, model_name: str, choices: list[str], max_tokens: int) -> None:
    system, messages, tools = await turn_two_request()
    print(f"turn 2's request: {[m.role for m in messages]}", flush=True)
    for choice in choices:
        real = OpenAIChatModel(model_name, base_url=base_url, timeout=1800.0, max_tokens=max_tokens)
        if choice != "auto":   # the adapter sends no tool_choice (the server's default, auto)
            create = real._client.chat.completions.create

            async def with_choice(*, _create: Any = create, _choice: str = choice, **kw: Any) -> Any:
                return await _create(**kw, tool_choice=_choice)
            real._client.chat.completions.create = with_choice
        started = time.monotonic()
        try:
            turn = await real.complete(system, messages, tools)
        finally:
            await real.aclose()
        print(f"tool_choice={choice}: {time.monotonic() - started:.0f} s, prompt {turn.input_tokens}, cached "
              f"{turn.cached_tokens}, structured calls {[(c.name, c.arguments) for c in turn.tool_calls]}, calls "
              f"read from the text {[(c.name, c.arguments) for c in text_calls(turn.text)]}\n  text: {turn.text!r}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-tokens", type=int, default=60)
    parser.add_argument("choices", nargs="*", default=["auto", "required"], help="tool_choice values to send")
    args = parser.parse_args()
    asyncio.run(probe(args.base_url, args.model, args.choices, args.max_tokens))


if __name__ == "__main__":
    main()
