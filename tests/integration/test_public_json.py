"""The public JSON of `shopbot status --json` and `shopbot reports --json` keeps the shapes docs/operations.md
documents."""
from __future__ import annotations

import json
import re
from pathlib import Path

from tests.integration.test_cli import shopbot
from tests.support import ROOT

OPEN_MAPS = {"$.counters", "$.actions"}     # kind or state -> count, holding only what was seen (docs/operations.md)


def documented(name: str) -> object:
    """The JSON example under `<!-- shape: name -->` in docs/operations.md."""
    page = (ROOT / "docs" / "operations.md").read_text()
    found = re.search(rf"<!-- shape: {name} -->\n```json\n(.*?)\n```", page, flags=re.S)
    assert found, f"docs/operations.md documents no shape for {name}"
    return json.loads(found.group(1))


def shape_errors(doc: object, real: object, path: str = "$") -> list[str]:
    """Keys missing on either side, recursively; lists compare their first elements where both have one."""
    if isinstance(doc, dict) and isinstance(real, dict) and path in OPEN_MAPS:
        return [f"{path}.{k}: not a count" for k, v in real.items() if not isinstance(v, int)]
    if isinstance(doc, dict) and isinstance(real, dict):
        errors = [f"{path}.{k}: documented, not in the output" for k in doc if k not in real]
        errors += [f"{path}.{k}: in the output, not documented" for k in real if k not in doc]
        for key in doc.keys() & real.keys():
            errors += shape_errors(doc[key], real[key], f"{path}.{key}")
        return errors
    if isinstance(doc, list) and isinstance(real, list):
        return shape_errors(doc[0], real[0], f"{path}[0]") if doc and real else []
    if doc is None or real is None or type(doc) is type(real) or {type(doc), type(real)} <= {int, float}:
        return []
    return [f"{path}: documented as {type(doc).__name__}, output is {type(real).__name__}"]


def produced(tmp_path: Path) -> tuple[object, object]:
    db = tmp_path / "s.sqlite3"
    assert shopbot("admit", "--source", "tg:1001:5", "--session", "tg:1001", "--text", "how much vanilla",
                   db=db).returncode == 0
    assert shopbot("run", "--drain", db=db).returncode == 0
    status = json.loads(shopbot("status", "--json", db=db).stdout)
    reports = json.loads(shopbot("reports", "--json", db=db).stdout)
    return status, reports


def test_status_and_reports_json_match_the_documented_shapes(tmp_path):
    status, reports = produced(tmp_path)
    assert shape_errors(documented("status"), status) == []
    assert shape_errors(documented("reports"), reports) == []
    assert set(status["work"]) == {"pending", "running", "finished", "failed"}
    assert set(status["deliveries"]) == {"pending", "sending", "confirmed", "unknown", "failed", "denied"}


def test_a_report_names_the_source_identity_of_the_message_it_answers(tmp_path):
    _, reports = produced(tmp_path)
    answer = next(r for r in reports if r["destination"] == "tg:1001")
    assert answer["work"] == [1] and answer["sources"] == ["tg:1001:5"]


def test_the_shape_check_catches_a_renamed_key():
    """Negative control: the comparison is not vacuous."""
    doc = documented("reports")
    renamed = json.loads(json.dumps(doc).replace('"sources"', '"source_ids"'))
    assert shape_errors(doc, renamed) == ["$[0].sources: documented, not in the output",
                                          "$[0].source_ids: in the output, not documented"]
    nested = json.loads(json.dumps(documented("status")).replace('"W_s"', '"W"'))
    assert "$.littles_law.W_s: documented, not in the output" in shape_errors(documented("status"), nested)
