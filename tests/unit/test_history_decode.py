"""worker/history.py: a stored exchange is decoded and costed once and kept (every turn reads up to 200 history
rows), each caller still gets its own list, the cost kept is the cost counted, and what is kept is bounded."""
from __future__ import annotations

from worker import history
from worker.models.base import Message, ToolCall

SAID = [Message("user", "how much vanilla"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "stock_level", '{"item": "vanilla"}'),)),
        Message("tool", '{"on_hand": 2}', tool_call_id="c1"),
        Message("tool", "no such item", tool_call_id="c2", is_error=True),
        Message("assistant", "Vanilla: 2 tubs.")]


def test_an_exchange_decodes_to_what_was_encoded():
    assert history.decode(history.encode(SAID)) == SAID


def test_the_same_exchange_read_again_is_not_decoded_again_and_each_caller_gets_its_own_list():
    text = history.encode([*SAID, Message("user", "a text no other test stores")])
    before = history._decoded.cache_info()
    first = history.decode(text)
    second = history.decode(str(text.encode().decode()))     # an equal text, another object: as a new read gives
    after = history._decoded.cache_info()
    assert after.misses == before.misses + 1 and after.hits == before.hits + 1
    assert first == second and first is not second
    first.append(Message("assistant", "appended by one caller"))   # exchanges() appends to a list it was given
    assert history.decode(text) == second and len(second) == len(SAID) + 1


def test_what_is_kept_is_bounded():
    for n in range(history.DECODED_KEPT + 10):
        history.decode(history.encode([Message("user", f"question {n}")]))
    assert history._decoded.cache_info().currsize == history.DECODED_KEPT


def test_the_kept_cost_is_the_counted_one_and_the_cut_is_the_same():
    rows = []
    for n in range(40):
        said = [Message("user", f"question {n} " + "x" * (n * 7)), *SAID[1:4],
                Message("assistant", f"answer {n} " + "y" * (n * 11))]
        rows += [("user", said[0].text, None), ("assistant", said[-1].text, history.encode(said))]
    found = history.exchanges(rows)
    plain = [list(exchange) for exchange in found]          # the same messages, counted afresh
    assert [history.cost(e) for e in found] == [history.cost(e) for e in plain]
    assert history.cut(found, 300) == history.cut(plain, 300) > 0
    assert history.fit(found, 300) == history.fit(plain, 300)


def test_an_answer_row_after_a_stored_exchange_is_counted_with_it():
    # a row without its exchange (stored before C17) after one with it: the exchange grows, and so does its cost
    rows = [("user", "how much vanilla", None), ("assistant", "Vanilla: 2 tubs.", history.encode(SAID)),
            ("assistant", "and a very long afterthought " * 20, None)]
    [exchange] = history.exchanges(rows)
    assert len(exchange) == len(SAID) + 1
    assert history.cost(exchange) == history.cost(list(exchange)) > history.cost(SAID)
