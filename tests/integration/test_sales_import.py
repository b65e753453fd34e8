"""`shopbot import-sales`, `shopbot reorder-suggestions` and `shopbot settings reset`, in-process on a real SQLite
file with the example shop file (Europe/London; vanilla's alias "vainilla", lead time 3 days)."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.cli.commands import main
from bot.sandbox.local_setup import quiet_shop  # the example shop, no brief at start
from store import SqliteStore, SystemClock
from tests.support import ROOT

TODAY = datetime.now(ZoneInfo("Europe/London")).date()


def ago(n: int) -> str:
    return (TODAY - timedelta(days=n)).isoformat()


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("SHOPBOT_DB", str(tmp_path / "shop.sqlite3"))
    monkeypatch.setenv("SHOPBOT_SHOP_FILE", str(quiet_shop(tmp_path)))

    def run(*args: str, text: str | None = None) -> tuple[int, str, str]:
        if text is not None:
            (tmp_path / "sales.csv").write_text(text)
            args = (*args, str(tmp_path / "sales.csv"))
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err
    return run


def recorded(tmp_path: Path) -> list[tuple]:
    async def read() -> list[tuple]:
        store = await SqliteStore.open(tmp_path / "shop.sqlite3", SystemClock())
        try:
            rows = await store.sales_days(TODAY - timedelta(days=60), TODAY, "Europe/London")
            return [(r.item, r.day.isoformat(), r.quantity, r.source) for r in rows]
        finally:
            await store.close()
    return asyncio.run(read())


def test_an_import_is_stored_once_with_aliases_and_header_in_any_order(cli, tmp_path):
    text = f"Quantity,Date,Item\n3,{ago(2)},vanilla\n0,{ago(1)},vainilla\n5,{ago(1)},chocolate\n\n"
    code, out, err = cli("import-sales", text=text)
    assert code == 0, err
    assert "3 day(s) added, 0 already recorded" in out
    assert recorded(tmp_path) == [("chocolate", ago(1), 5, "import"), ("vanilla", ago(2), 3, "import"),
                                  ("vanilla", ago(1), 0, "import")]
    code, out, _ = cli("import-sales", text=text)                 # the same file again: nothing changes
    assert code == 0 and "0 day(s) added, 3 already recorded (unchanged)" in out
    assert len(recorded(tmp_path)) == 3


def test_every_bad_line_is_reported_and_nothing_is_stored(cli, tmp_path):
    text = (f"date,item,quantity\n"
            f"{ago(3)},vanilla,2\n"               # 2: good, but the file is refused as a whole
            f"{ago(3)},vanilla\n"                 # 3: a field short
            f"03/01/2027,vanilla,2\n"             # 4: not an ISO date
            f"{TODAY.isoformat()},vanilla,2\n"    # 5: today is not over
            f"{ago(3)},pistachio,2\n"             # 6: unknown item
            f"{ago(4)},vanilla,-1\n"              # 7: not a whole number from 0
            f"{ago(4)},chocolate,2.5\n"           # 8: not a whole number
            f"{ago(3)},vainilla,2\n")             # 9: the same item and day as line 2 (an alias)
    code, out, err = cli("import-sales", text=text)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert [line.split(": ", 1)[1].split(":")[0] for line in lines[:-1]] == [f"line {n}" for n in range(3, 10)]
    assert "2 field(s), the header has 3" in lines[0] and "not an ISO date" in lines[1]
    assert "is not over yet" in lines[2] and "unknown item 'pistachio'" in lines[3]
    assert "not a whole number" in lines[4] and "not a whole number" in lines[5]
    assert "already on line 2" in lines[6]
    assert lines[-1] == "nothing imported: 7 bad line(s)"
    assert recorded(tmp_path) == []


def test_other_columns_are_refused_by_name(cli, tmp_path):
    code, _, err = cli("import-sales", text=f"date,item,quantity,price\n{ago(1)},vanilla,2,3.00\n")
    assert code == 1 and "line 1: column 'price' is not one of date, item, quantity" in err
    code, _, err = cli("import-sales", text=f"date,item\n{ago(1)},vanilla\n")
    assert code == 1 and "column 'quantity' is missing" in err
    code, _, err = cli("import-sales", text="")
    assert code == 1 and "line 1: no header line" in err
    assert recorded(tmp_path) == []


def test_a_different_quantity_for_a_recorded_day_refuses_the_whole_file(cli, tmp_path):
    assert cli("import-sales", text=f"date,item,quantity\n{ago(2)},vanilla,3\n")[0] == 0
    code, _, err = cli("import-sales", text=f"date,item,quantity\n{ago(1)},vanilla,1\n{ago(2)},vanilla,4\n")
    assert code == 1
    assert f"line 3: conflict: vanilla on {ago(2)} is already recorded as 3 (imported before), not 4" in err
    assert recorded(tmp_path) == [("vanilla", ago(2), 3, "import")]     # line 2 was not stored either


def test_suggestions_from_imported_history_and_settings_reset(cli, tmp_path):
    # vanilla: 2, 4, 2, 4, ... over the 28 days before today: d = 3, σ = 1; lead time 3, review 7, 95 %:
    # ROP = 9 + 1.6449·√3 = 11.85 -> 12, S = 30 + 1.6449·√10 = 35.20 -> 36. Chocolate: only 5 days.
    lines = [f"{ago(n)},vanilla,{2 if n % 2 else 4}" for n in range(1, 29)]
    lines += [f"{ago(n)},choc,1" for n in range(1, 6)]
    assert cli("import-sales", text="date,item,quantity\n" + "\n".join(lines) + "\n")[0] == 0
    code, out, err = cli("reorder-suggestions", "--json")
    assert code == 0, err
    found = {row["item"]: row for row in json.loads(out)}
    assert found["vanilla"] == {"item": "vanilla", "days": 28, "daily_mean": 3.0,
                                "daily_sd": 1.0, "reorder_point": {"current": 8, "suggested": 12},
                                "target": {"current": 8, "suggested": 36}, "reason": found["vanilla"]["reason"]}
    assert found["chocolate"]["reorder_point"] == {"current": 6, "suggested": None}
    assert found["chocolate"]["reason"] == "only 5 counted day(s) of sales in the last 28 (14 needed)"
    code, out, _ = cli("reorder-suggestions")
    assert code == 0 and "vanilla: reorder point 8 -> 12, target 8 -> 36" in out

    async def apply() -> None:
        store = await SqliteStore.open(tmp_path / "shop.sqlite3", SystemClock())
        try:
            await store.apply_setting("vanilla", 12, 36, "owner 1")
        finally:
            await store.close()
    asyncio.run(apply())
    assert json.loads(cli("reorder-suggestions", "--json")[1])[2]["reorder_point"]["current"] == 12
    code, out, _ = cli("status")
    assert code == 0
    assert "applied:    vanilla reorder point 12 (shop file 8), target 36 (shop file 8), by owner 1" in out
    code, out, _ = cli("settings", "reset", "vanilla")
    assert code == 0 and "back to the shop file's reorder point 8 and target 8" in out
    assert "no applied values" in cli("settings", "reset", "vanilla")[1]
    assert cli("settings", "reset", "pistachio")[0] == 1



def test_settings_reset_runs_the_stock_watchers_check_at_once(cli, tmp_path, monkeypatch):
    """Vanilla: 2 on hand, reorder point 8 in the shop file, 0 applied. Reset by the store alone (the negative control)
    admits nothing: only a check does. `shopbot settings reset` runs that check right after its commit, as a till
    count does: vanilla's reorder check is queued at once for the owner, not at the next scheduled check."""
    from bot.shop_file import load_shop
    monkeypatch.setenv("SHOPBOT_OWNER_IDS", "1001")
    items = load_shop(ROOT / "shop.example.toml").items

    async def on_store(body):  # type: ignore[no-untyped-def]
        store = await SqliteStore.open(tmp_path / "shop.sqlite3", SystemClock())
        try:
            return await body(store)
        finally:
            await store.close()

    async def prepare(store) -> None:  # type: ignore[no-untyped-def]
        await store.seed_shop(items, "shop.example.toml")
        await store.apply_setting("vanilla", 0, 8, "owner 1")
        assert await store.reset_setting("vanilla")          # the store alone: back to 8, no check run
        assert await store.work_with_report("stock:vanilla:1") is None
        await store.apply_setting("vanilla", 0, 8, "owner 1")
    asyncio.run(on_store(prepare))
    code, out, err = cli("settings", "reset", "vanilla")
    assert code == 0, err
    assert "back to the shop file's reorder point 8" in out
    assert "the stock watcher checked at once: reorder check(s) queued for " in out and "vanilla" in out
    with sqlite3.connect(tmp_path / "shop.sqlite3") as raw:
        episode = raw.execute("SELECT state, destination FROM work WHERE source = 'stock:vanilla:1'").fetchall()
    assert episode == [("pending", "tg:1001")]           # for the owner, as the app's own check admits it
