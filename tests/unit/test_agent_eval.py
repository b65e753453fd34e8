"""The agent evaluation's scripted model server stands alone (it imports nothing from shopbot), and a short run of
the evaluation through the whole product keeps every tool-backed number and blanks every invented one."""
import ast
import sys

import bench.agent_eval as agent_eval
from tests.support import ROOT

SERVER = ROOT / "bench" / "eval_model_server.py"


def test_the_eval_model_server_imports_only_the_standard_library():
    tree = ast.parse(SERVER.read_text())
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert modules - {"__future__"} <= set(sys.stdlib_module_names), modules
    assert not modules & {"bot", "store", "worker", "producers"}


async def test_a_short_evaluation_keeps_tool_numbers_and_blanks_invented_ones(monkeypatch):
    monkeypatch.setattr(agent_eval, "QUESTIONS", [q for q in agent_eval.QUESTIONS if q[0] in ("cover", "costs")])
    results = await agent_eval.evaluate(seed_value=3, invent_rate=0.6, verbose=False)
    assert len(results) == 7 and all(r.aligned for r in results)
    assert sum(r.cited for r in results) > 10 and sum(r.invented for r in results) > 0
    assert all(r.kept == r.cited and r.blanked == r.invented and not r.false_dash for r in results)


def test_the_score_catches_a_kept_invention_and_a_false_dash():   # negative controls for the bench's own check
    from bench.eval_model_server import Span, Turn
    turn = Turn("q", ["Vanilla on hand: ", Span("2 tubs", "cited"), ". I think about ", Span("417", "invented"),
                      " were sold."])
    good = agent_eval.score("stock", "q", turn, "Vanilla on hand: 2 tubs. I think about — were sold.")
    assert (good.kept, good.blanked, good.false_dash) == (1, 1, False)
    kept_invention = agent_eval.score("stock", "q", turn, "Vanilla on hand: 2 tubs. I think about 417 were sold.")
    assert kept_invention.blanked == 0
    false_dash = agent_eval.score("stock", "q", turn, "Vanilla on hand: — tubs. I think about — were sold.")
    assert false_dash.false_dash and false_dash.kept == 0
