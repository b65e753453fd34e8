"""The agent loop: one hand-written loop over a provider-neutral Model and a ToolRegistry.

Rules (each one is tested in tests/unit/test_agent_loop.py):

* Tools run sequentially, in the order the model gave them; several calls in one response are allowed and
  run one by one, so the journal order is the execution order.
* For a call that will run, `journal.started(...)` is awaited before the tool's fn and `journal.finished(...)`
  after it. The arguments journaled are the validated, normalised arguments (`model_dump(mode="json")`).
* A call that cannot run (unknown tool name, or arguments that fail `args_model.model_validate_json`) is
  answered to the model as an error tool message and is NOT journaled: the journal records operations, i.e.
  tool executions, and such a call executed nothing. It is not in `AgentResult.tool_results` either; it is
  logged (tool name and error, never the arguments). It does count against `max_tool_calls`.
  Empty arguments text ("") is read as "{}" (OpenAI-compatible servers send it for argument-less tools).
* `ToolError` from fn: `finished(call_id, "failed", {"error": msg})`, the model sees {"error": msg}, and the
  run goes on. Any other exception from fn propagates and `finished` is not called: the operation stays
  `started`, which is the honest record (the tool may or may not have acted) for the worker and recovery.
* Call ids: a call with an empty id, or an id already used in this run, gets a fresh unique id before it is
  journaled or echoed back to the model, so journal keys never collide.
* Limits end the run with a stop reason and a plain prose (no digits in it, so C13 cannot mangle it):
  - `model_calls`: checked before each model call; a response that asks for tools when no model call is
    left stops the run *before* those tools run (nobody would read their results).
  - `tool_calls`: counts every call the model asked for (run or rejected); the first call over the budget
    stops the run before it runs; the calls before it ran normally.
  - `seconds`: checked before each model call and each tool call; a model call is also cancelled when the
    remaining time runs out (a tool call is never cancelled: it may be writing).
  - `output_size`: the final answer longer than `max_output_chars` is cut at a word boundary and ends with
    a notice; the whole prose stays within `max_output_chars`.
* A provider's stop for a content filter, a refusal or a full context window ends the run with that stop
  reason and a notice that says so (with the model's text, if it gave some), never as "no answer text".
  A run stopped by a limit lists every figure of the tool calls that ran ok, in order (C13).
* Figures (C13): every ok tool result goes through `typed_result`: the model (and the journal) get what it
  shows (money as the owner reads it, times in the shop's zone) and the run's figures get every number in it.
  The figures of the turn's context (today's date and time, `context_figures`) belong to the run too. The final
  `text` is `render_report(prose, figures, question=user_text)`: unmatched numbers blanked, and the figures the
  prose cites and those of the items the question names under it.
* ModelError exceptions (and any exception from the model) propagate to the worker.
* Tool calls written as text (worker/text_calls.py): a response without a structured call whose text holds call
  objects runs them as calls (journaled like any call; the model's message is kept as those calls, without the
  text). A reply that still looks like a call is never delivered: the model is asked once more with
  `CORRECTION` (`CORRECTION_CALL`, asking for that call only, when the reply names exactly one offered tool); a
  second such reply raises `UnusableAnswer` (the worker fails the turn with an error report). The shape
  `{"<offered tool>": {...}}`, and an object with exactly the keys of a result a tool returned earlier in the
  conversation (made-up tool results, seen from a small model), are read as calls of that tool.
* Arguments: keys the tool does not take (any key, for a tool that takes none) are ignored and journaled under
  `IGNORED`; a wrong type or a missing required argument goes back to the model as a tool error it can correct.
* C17: `AgentResult.exchange` is what the model said and did this turn (the user message as sent, its calls with
  their results, its own final text; never a correction round nor a product notice), the history's next entry.
  An answer that no tool result backs and that speaks of the shop (C13 blanked its numbers, or it names one of the
  shop's items, `shop_words`) leaves no exchange at all: replayed, such answers taught a small model to answer every
  later turn from memory. Tool-less answers about anything else (a greeting, an off-topic question) stay history.
* An answer that only repeats the owner's question (a small model does so after a tool result, and the echo then
  taught the next turns, through the history, to answer by copying) is not sent back: the model is asked once more
  with `ECHO` (`ECHO_NO_RESULT` when no tool ran) after the turn's messages without its echo (shown its echo, it
  echoed again); the round is not part of the exchange, and a second echo is delivered as it is (it holds no
  figure) and leaves no exchange: once replayed, a 1.5B model answered every later turn with its question
  (bench/RESULTS.md, fourth pass).
* `Limits.look_up` (off in the app: measured worse, bench/RESULTS.md): a final answer with a number no figure
  holds, from a run that called no tool, is sent back once with `LOOK_UP`; not part of the exchange.
* C18: the system prompt carries nothing that changes in a day; `turn_head` (today's date and time) heads the
  latest user message, after the history.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import pydantic

from worker.figures import Figure, check, render_report
from worker.models.base import Message, Model, ModelTurn, ToolCall
from worker.money import ShopFormat
from worker.text_calls import looks_like_tool_call, result_shapes, text_calls
from worker.tools.registry import ToolError, ToolRegistry, typed_result

log = logging.getLogger("shopbot.agent")

StopReason = Literal["answered", "model_calls", "tool_calls", "seconds", "output_size", "content_filter", "refusal",
                     "context_window"]

NOTICE_MODEL_CALLS = "I stopped before finishing: this request needed more steps than one turn allows."
NOTICE_TOOL_CALLS = "I stopped before finishing: this request needed more tool calls than one turn allows."
NOTICE_SECONDS = "I stopped before finishing: this request took longer than one turn allows."
NOTICE_OUTPUT_SIZE = "[Answer cut short: it was longer than a report may be.]"
NOTICE_PARTIAL = "The figures below come from the steps that did run."
NOTICE_TRUNCATED = "[The model's answer was cut off at its length limit.]"
NOTICE_EMPTY = "(The model gave no answer text.)"
NOTICE_CONTENT_FILTER = "[The model's content filter stopped this answer.]"
NOTICE_REFUSAL = "The model declined to answer this request."
NOTICE_CONTEXT_WINDOW = ("This conversation is too long for the model's context window, so it could not answer. "
                         "/forget starts the conversation afresh.")
CORRECTION = ("Your last reply looked like a tool call written as text, and it could not be read. Either call one of "
              "the offered tools with a proper tool call, or answer the owner in plain words.")
# when the unreadable reply names exactly one offered tool: asked for that call only (offered a way out in words, a
# small model answered from memory instead, and its numbers were blanked)
CORRECTION_CALL = ("Your last reply looked like a call of {tool} written as text, and it could not be read. Call "
                   "{tool} again with a proper tool call.")
LOOK_UP = ("No tool was called for this question, so your answer is not from the shop's records. Call the tool "
           "that has the answer now, then answer from its result.")
# the echo round: the echo itself is not sent back (shown its own echo, the model echoed again, 5 questions of 5 in a
# probe; asked this after the tool result alone, it answered all 5: bench/RESULTS.md, fourth pass)
ECHO = "Answer my question from the tool result above, in one sentence."
ECHO_NO_RESULT = "Answer my question in one sentence, or call the tool that has the answer."
IGNORED = "ignored"   # the journaled arguments' key for the ones the tool does not take
_STOPS = {"content_filter": NOTICE_CONTENT_FILTER, "refusal": NOTICE_REFUSAL, "context_window": NOTICE_CONTEXT_WINDOW}


@dataclass(frozen=True)
class Limits:
    max_model_calls: int = 6
    max_tool_calls: int = 24
    max_seconds: float = 180.0    # SHOPBOT_TURN_TIMEOUT_S: the whole turn, a model call in flight included
    max_output_chars: int = 6000
    look_up: bool = False   # an answer with numbers but no tool call is sent back once (`LOOK_UP`): off, see RESULTS


class Journal(Protocol):
    async def started(self, call_id: str, tool: str, arguments: dict[str, Any], effect: str) -> None: ...

    async def finished(self, call_id: str, status: Literal["done", "failed"], result: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    tool: str
    arguments: dict[str, Any]
    result: dict[str, Any]
    ok: bool
    effect: str


@dataclass(frozen=True)
class AgentResult:
    text: str  # the report body: render_report(prose, the run's figures, question=user_text)
    prose: str
    stop_reason: StopReason
    tool_results: tuple[ToolResult, ...]
    model_calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    exchange: tuple[Message, ...] = ()   # C17: what the model said and did this turn (the history's next entry)
    model_text: str = ""                 # the model's own final prose, before C13's rendering ("" for a stop)


class UnusableAnswer(Exception):
    """The model answered with a tool call written as text that could not be run, twice: it is never delivered."""


def _tool_message(call_id: str, payload: dict[str, Any], *, is_error: bool) -> Message:
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return Message(role="tool", text=text, tool_call_id=call_id, is_error=is_error)


def _bound(prose: str, max_chars: int) -> str:
    """Cut `prose` to at most max_chars including the notice, never inside a word (or a number)."""
    tail = "\n\n" + NOTICE_OUTPUT_SIZE
    room = max_chars - len(tail)
    if room <= 0:
        return NOTICE_OUTPUT_SIZE[:max_chars]
    cut = prose[:room]
    if room < len(prose) and not prose[room].isspace():
        space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
        cut = cut[:space] if space > 0 else ""
    return cut.rstrip() + tail if cut.strip() else NOTICE_OUTPUT_SIZE


class _Run:
    def __init__(self, registry: ToolRegistry, journal: Journal, context: Any, fmt: ShopFormat) -> None:
        self.registry = registry
        self.fmt = fmt
        self.journal = journal
        self.context = context
        self.results: list[ToolResult] = []
        self.figures: list[Figure] = []
        self.seen_ids: set[str] = set()

    def fresh_id(self, call: ToolCall) -> ToolCall:
        call_id = call.id
        if not call_id or call_id in self.seen_ids:
            call_id = f"call_{len(self.seen_ids)}_{uuid.uuid4().hex[:12]}"
        self.seen_ids.add(call_id)
        return call if call_id == call.id else ToolCall(id=call_id, name=call.name, arguments=call.arguments)

    async def execute(self, call: ToolCall) -> Message:
        tool = self.registry.get(call.name)
        if tool is None:
            log.warning("model asked for unknown tool %r", call.name)
            known = ", ".join(self.registry.names()) or "none"
            return _tool_message(
                call.id, {"error": f"unknown tool {call.name!r}; available tools: {known}"}, is_error=True
            )
        try:
            data = json.loads(call.arguments.strip() or "{}")
            if isinstance(data, str):            # double-encoded arguments
                data = json.loads(data.strip() or "{}")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            log.warning("model sent arguments that are not a JSON object for %r", call.name)
            return _tool_message(call.id, {"error": f"invalid arguments for {call.name}: not a JSON object"},
                                 is_error=True)
        fields = tool.args_model.model_fields
        ignored = {k: v for k, v in data.items() if k not in fields}
        try:
            args = tool.args_model.model_validate({k: v for k, v in data.items() if k in fields})
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
            )
            log.warning("model sent invalid arguments for %r: %s", call.name, problems)
            return _tool_message(
                call.id, {"error": f"invalid arguments for {call.name}: {problems}"}, is_error=True
            )
        arguments = args.model_dump(mode="json")
        if ignored:   # recorded, never acted on: a small model sends a schema or junk to a tool without arguments
            arguments[IGNORED] = ignored
        await self.journal.started(call.id, tool.name, arguments, tool.effect)
        try:
            result = await tool.fn(args, self.context)
        except ToolError as exc:
            failure = {"error": str(exc) or type(exc).__name__}
            await self.journal.finished(call.id, "failed", failure)
            self.results.append(ToolResult(call.id, tool.name, arguments, failure, False, tool.effect))
            return _tool_message(call.id, failure, is_error=True)
        if not isinstance(result, dict):
            raise TypeError(f"tool {tool.name!r} returned {type(result).__name__}, not a dict")
        payload, figures = typed_result(result, self.fmt)
        await self.journal.finished(call.id, "done", payload)
        self.results.append(ToolResult(call.id, tool.name, arguments, payload, True, tool.effect))
        self.figures.extend(figures)
        return _tool_message(call.id, payload, is_error=False)


async def run_agent(
    *,
    model: Model,
    registry: ToolRegistry,
    system: str,
    history: Sequence[Message],
    user_text: str,
    journal: Journal,
    context: Any,
    limits: Limits = Limits(),
    monotonic: Callable[[], float] = time.monotonic,
    fmt: ShopFormat | None = None,
    context_figures: Sequence[Figure] = (),
    turn_head: str = "",
    shop_words: Collection[str] = (),
) -> AgentResult:
    fmt = fmt or ShopFormat()
    run = _Run(registry, journal, context, fmt)
    user = Message(role="user", text=f"{turn_head}\n\n{user_text}" if turn_head else user_text)
    messages: list[Message] = [*history, user]
    first = len(history)        # the exchange starts at the user message
    skipped: set[int] = set()   # indexes of a correction round: not part of the exchange
    specs = registry.specs()
    deadline = monotonic() + limits.max_seconds
    model_calls = tool_calls = input_tokens = output_tokens = cached_tokens = 0
    corrected = looked_up = echoed = False

    def unbacked(answer: str) -> bool:
        """An answer about the shop that no tool result of this turn backs: numbers C13 would blank, or a shop item
        named."""
        return not run.results and (bool(check(answer, [*context_figures, *run.figures], fmt).blanked)
                                    or _names_any(answer, shop_words))

    def finish(prose: str, reason: StopReason, final: str = "") -> AgentResult:
        partial = reason in ("model_calls", "tool_calls", "seconds")
        if partial and run.figures:
            prose = f"{prose} {NOTICE_PARTIAL}"
        figures = run.figures if partial else [*context_figures, *run.figures]
        kept = [m for i, m in enumerate(messages[first:], start=first) if i not in skipped]
        if final:
            kept.append(Message(role="assistant", text=final))
        if reason == "answered" and (unbacked(final) or _echoes(final, user_text)):
            # the shop from memory, or the question again (the echo round did not help): replayed, the one taught a
            # small model to answer the next turns without a tool, the other to answer them with their question
            kept = []
        return AgentResult(
            text=render_report(prose, figures, question=user_text, fmt=fmt, show_all=partial),
            prose=prose,
            stop_reason=reason,
            tool_results=tuple(run.results),
            model_calls=model_calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached_tokens,
            exchange=_answered_calls_only(kept),
            model_text=final,
        )

    while True:
        if model_calls >= limits.max_model_calls:
            return finish(NOTICE_MODEL_CALLS, "model_calls")
        remaining = deadline - monotonic()
        if remaining <= 0:
            return finish(NOTICE_SECONDS, "seconds")
        budget = asyncio.timeout(remaining)
        try:
            async with budget:
                turn: ModelTurn = await model.complete(system, tuple(messages), specs)
        except TimeoutError:
            if not budget.expired():
                raise  # the model's own timeout, not our deadline: it propagates like any model error
            return finish(NOTICE_SECONDS, "seconds")
        model_calls += 1
        input_tokens += turn.input_tokens
        output_tokens += turn.output_tokens
        cached_tokens += turn.cached_tokens

        if not turn.tool_calls and turn.stop not in _STOPS:
            written = text_calls(turn.text, registry.names(), result_shapes(messages))
            if written:                     # a call written as text: run it as a call
                log.info("model wrote %d tool call(s) as text; running them as calls", len(written))
                turn = dataclasses.replace(turn, text="", tool_calls=written)
            elif looks_like_tool_call(turn.text):
                if corrected:
                    raise UnusableAnswer("the model answered twice with a tool call that could not be read")
                corrected = True
                log.warning("model reply looks like a tool call that cannot be read; asking once more")
                skipped.update((len(messages), len(messages) + 1))
                messages += [Message(role="assistant", text=turn.text),
                             Message(role="user", text=_correction(turn.text, registry.names()))]
                continue

        if (not turn.tool_calls and turn.stop not in _STOPS and not echoed and model_calls < limits.max_model_calls
                and _echoes(turn.text, user_text)):
            echoed = True
            log.info("model answered by repeating the question; asking once more")
            skipped.add(len(messages))
            messages.append(Message(role="user", text=ECHO if run.results else ECHO_NO_RESULT))
            continue

        if (limits.look_up and not turn.tool_calls and turn.stop not in _STOPS and not looked_up and tool_calls == 0
                and model_calls < limits.max_model_calls and unbacked(turn.text)):
            # a small model answers a follow-up from the history instead of a tool: its numbers would all be blanked
            looked_up = True
            skipped.update((len(messages), len(messages) + 1))
            messages += [Message(role="assistant", text=turn.text), Message(role="user", text=LOOK_UP)]
            continue

        if not turn.tool_calls:
            reason: StopReason = "answered"
            prose = turn.text.strip() or NOTICE_EMPTY
            if turn.stop in _STOPS:   # shown as what it is, not as "no answer text"
                reason = turn.stop    # type: ignore[assignment]
                notice = _STOPS[turn.stop]
                text = "" if looks_like_tool_call(turn.text) else turn.text.strip()   # never delivered (C17)
                prose = (f"{notice}\n\n{text}" if turn.stop == "refusal" else f"{text}\n\n{notice}") if text else notice
            elif turn.truncated:
                prose = f"{prose}\n\n{NOTICE_TRUNCATED}"
            if len(prose) > limits.max_output_chars:
                return finish(_bound(prose, limits.max_output_chars), "output_size", turn.text)
            return finish(prose, reason, turn.text)

        if model_calls >= limits.max_model_calls:
            return finish(NOTICE_MODEL_CALLS, "model_calls")

        calls = tuple(run.fresh_id(call) for call in turn.tool_calls)
        messages.append(Message(role="assistant", text=turn.text, tool_calls=calls))
        for call in calls:
            if tool_calls >= limits.max_tool_calls:
                return finish(NOTICE_TOOL_CALLS, "tool_calls")
            if monotonic() >= deadline:
                return finish(NOTICE_SECONDS, "seconds")
            tool_calls += 1
            messages.append(await run.execute(call))


def _correction(text: str, names: Sequence[str]) -> str:
    """The correction for an unreadable call-looking reply: for the one offered tool it names, else the general one."""
    named = [name for name in names if re.search(rf"\b{re.escape(name)}\b", text)]
    return CORRECTION_CALL.format(tool=named[0]) if len(named) == 1 else CORRECTION


def _names_any(text: str, words: Collection[str]) -> bool:
    lowered = text.lower()
    return any(re.search(rf"\b{re.escape(word.lower())}", lowered) for word in words if word)


# a run of letters or digits (`str.isalnum`: \w is exactly that and `_`)
_WORD = re.compile(r"[^\W_]+")


def _echoes(answer: str, question: str) -> bool:
    """The answer is the owner's question again (case, punctuation and spacing aside). Word by word, stopping at the
    first that differs: most answers are longer than their question, and differ at once."""
    asked = _WORD.findall(question.lower())
    if not asked:
        return False
    said = _WORD.finditer(answer.lower())
    for word in asked:
        found = next(said, None)
        if found is None or found.group() != word:
            return False
    return next(said, None) is None


def _answered_calls_only(messages: list[Message]) -> tuple[Message, ...]:
    """The exchange as history may replay it: a call that never ran (a limit stopped the run first) is dropped from
    its message, since every call replayed must have its result."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    out: list[Message] = []
    for m in messages:
        if m.tool_calls and any(c.id not in answered for c in m.tool_calls):
            calls = tuple(c for c in m.tool_calls if c.id in answered)
            if not calls and not m.text:
                continue
            m = dataclasses.replace(m, tool_calls=calls)
        out.append(m)
    return tuple(out)
