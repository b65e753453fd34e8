"""The echo round, probed: after a tool result a small model may answer with the owner's question; which follow-up
makes it answer? (bench/RESULTS.md, "Fourth pass"; a probe, not a test.)

    .venv/bin/python -m bench.real_model_echo --base-url http://127.0.0.1:8090/v1 --model qwen [V0 V2 ...]

For five questions a 1.5B model echoed (stock, an item on order, what is low, an item with nothing on order,
proposals), the product's worker builds the turn on bench/agent_eval.py's seeded shop with a scripted model that calls
the question's tool (its result real) and then echoes; each variant of the request after the result is then sent to
the server once and its reply printed:

V0 the request after the tool result, as sent (does the model echo?)
V1 the echo round as the product sent it before the fourth pass (the echo, then a note asking for an answer)
V2 the request after the result, then "Answer my question from the tool result above, in one sentence." (no echo:
   the product's round since the fourth pass, `ECHO`)
V3 the question without its head (date line and `TOOL_FIRST`)
V4 the head after the question
V5 the echo, then a note quoting the question
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
import time
from collections.abc import Sequence

from bench.real_model import seeded_shop, worker_settings
from bench.real_model_turn2 import Scripted
from store import Occurrence
from worker.agent_loop import ECHO, Limits
from worker.models.base import Message, ModelTurn, ToolCall, ToolSpec
from worker.models.openai_chat import OpenAIChatModel
from worker.worker import Worker

CASES = [("How much strawberry do we have?", "get_item", '{"item": "strawberry"}'),
         ("Is any vanilla on order?", "on_order", '{"item": "vanilla"}'),
         ("What is running low?", "reorder_need", "{}"),
         ("Is anything on order for cones?", "on_order", '{"item": "cones"}'),
         ("Which proposals are waiting for my approval?", "open_proposals", "{}")]
BEFORE = ("Your reply only repeated the question. Answer it in plain words from the tool results above, or call the "
          "tool that has the answer.")   # the echo round's note before the fourth pass

Request = tuple[str, tuple[Message, ...], tuple[ToolSpec, ...]]


async def requests_for(question: str, tool: str, arguments: str) -> list[Request]:
    """The turn's requests with a scripted model: the call, then an echo (the second request is after the result)."""
    with tempfile.TemporaryDirectory(prefix="shopbot-echo-") as tmp:
        _, shop, store = await seeded_shop(tmp)
        try:
            model = Scripted([ModelTurn("", (ToolCall("call_1", tool, arguments),)), ModelTurn(question, ()),
                              ModelTurn(question, ())])
            await store.admit(Occurrence("echo:1", "tg:7000", question, destination="tg:7000"))
            await Worker(store, model, worker_settings(shop, 0, Limits(max_seconds=600.0))).drain()
        finally:
            await store.close()
    return model.requests


def variants(after: Sequence[Message], question: str) -> dict[str, tuple[Message, ...]]:
    user, rest = after[0], tuple(after[1:])
    head, _, text = user.text.partition("\n\n")
    echo = Message("assistant", question)
    return {
        "V0": tuple(after),
        "V1": (*after, echo, Message("user", BEFORE)),
        "V2": (*after, Message("user", ECHO)),
        "V3": (dataclasses.replace(user, text=text), *rest),
        "V4": (dataclasses.replace(user, text=f"{text}\n\n{head}"), *rest),
        "V5": (*after, echo, Message("user", f"You repeated my question. Tell me the answer to it from the tool "
                                             f"result above: {text}")),
    }


async def probe(base_url: str, model_name: str, which: Sequence[str], max_tokens: int) -> None:
    real = OpenAIChatModel(model_name, base_url=base_url, timeout=600.0, max_tokens=max_tokens)
    try:
        for question, tool, arguments in CASES:
            system, after, tools = (await requests_for(question, tool, arguments))[1]
            print(f"== {question} [{tool} {arguments}]\n   result: {after[-1].text[:300]}", flush=True)
            for name, messages in variants(after, question).items():
                if which and name not in which:
                    continue
                started = time.monotonic()
                turn = await real.complete(system, messages, tools)
                calls = [(c.name, c.arguments) for c in turn.tool_calls]
                print(f"   {name} ({time.monotonic() - started:.1f} s): {turn.text.strip()[:200]!r} {calls}",
                      flush=True)
    finally:
        await real.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-tokens", type=int, default=150)
    parser.add_argument("variants", nargs="*", help="V0 ... V5 (default: all)")
    args = parser.parse_args()
    asyncio.run(probe(args.base_url, args.model, args.variants, args.max_tokens))


if __name__ == "__main__":
    main()
