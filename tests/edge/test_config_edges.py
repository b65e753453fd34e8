"""Every setting is checked: one line per problem naming the key, the bad value and what is expected; exit code 2 and
no traceback from every command; a shop file with several errors reports all of them, each with its path."""
from __future__ import annotations

import pytest

from bot import config
from bot.shop_file import ShopFileError, parse_shop
from tests.integration.test_cli import ROOT, shopbot

TOKEN = {"TELEGRAM_BOT_TOKEN": "123:abc"}


def problems(env: dict[str, str]) -> list[str]:
    with pytest.raises(config.ConfigError) as caught:
        config.load(env)
    return caught.value.lines


@pytest.mark.parametrize("value", ["1001 1002", "0", "-5", "1_001", "\uff11\uff10\uff10\uff11", "1001,,1002",
                                   "1001;1002", "abc", "1001,1001", "+5", "1e3"])
def test_formerly_bug_owner_ids_other_than_comma_separated_positive_ascii_numbers_are_refused(value):
    lines = problems({**TOKEN, "SHOPBOT_OWNER_IDS": value})
    assert len(lines) == 1
    assert lines[0].startswith(f"SHOPBOT_OWNER_IDS={value!r}: expected ")


def test_owner_ids_may_have_spaces_around_the_commas():
    assert config.load({**TOKEN, "SHOPBOT_OWNER_IDS": " 1001 , 1002,1003 "}).owner_ids == (1001, 1002, 1003)


def test_formerly_bug_an_owner_chat_outside_the_owner_ids_is_refused():
    lines = problems({**TOKEN, "SHOPBOT_OWNER_IDS": "1001", "SHOPBOT_OWNER_CHAT_ID": "2002"})
    assert lines == ["SHOPBOT_OWNER_CHAT_ID='2002': expected one of the owner ids in SHOPBOT_OWNER_IDS (briefs and "
                     "proposals to any other chat are refused)"]
    assert config.load({**TOKEN, "SHOPBOT_OWNER_IDS": "1001,1002",
                        "SHOPBOT_OWNER_CHAT_ID": "1002"}).owner_chat_id == 1002


def test_formerly_bug_a_token_without_owner_ids_is_refused():
    lines = problems(TOKEN)
    assert len(lines) == 1 and lines[0].startswith("SHOPBOT_OWNER_IDS='': expected at least one owner id")


@pytest.mark.parametrize("key,value", [
    ("SHOPBOT_HTTP_PORT", "99999"), ("SHOPBOT_HTTP_PORT", "-2"), ("SHOPBOT_HTTP_PORT", "80 80"),
    ("SHOPBOT_CAPACITY", "0"), ("SHOPBOT_CAPACITY", "1_000"), ("SHOPBOT_CAPACITY", "\uff15"),
    ("SHOPBOT_ATTEMPT_CAP", "0"), ("SHOPBOT_WORKER_CONCURRENCY", "0"), ("SHOPBOT_PROPOSAL_EXPIRY_HOURS", "0"),
    ("SHOPBOT_DEBOUNCE_MS", "-1"), ("SHOPBOT_DEBOUNCE_MS", "0.5"), ("SHOPBOT_CHAT_PACE_MS", "-1"),
    ("SHOPBOT_GLOBAL_PACE_PER_S", "-3"),
    ("SHOPBOT_SUPPLIER_URL", "supplier.example"), ("SHOPBOT_SUPPLIER_URL", "http://"),
    ("SHOPBOT_SUPPLIER_URL", "ftp://supplier.example"), ("SHOPBOT_MODEL_BASE_URL", "http://host:99999/v1"),
    ("SHOPBOT_MODEL_BASE_URL", "http://ho st/v1"), ("TELEGRAM_API_BASE_URL", "api.telegram.org"),
    ("SHOPBOT_MODEL", "gpt-4"), ("SHOPBOT_MODEL", "openai:"), ("SHOPBOT_LOG_LEVEL", "LOUD"),
    ("SHOPBOT_TEST_MODE", "yes"), ("SHOPBOT_DB", "/no/such/folder/shop.sqlite3"),
    ("SHOPBOT_LOG_FILE", "/no/such/folder/shop.log"),
])
def test_formerly_bug_a_bad_value_is_one_line_naming_the_key_the_value_and_what_is_expected(key, value):
    lines = problems({key: value})
    assert len(lines) == 1
    assert lines[0].startswith(f"{key}={value!r}: expected ")


def test_a_webhook_url_must_be_https():
    lines = problems({"SHOPBOT_WEBHOOK_URL": "http://bot.example/telegram/webhook", "SHOPBOT_WEBHOOK_SECRET": "s"})
    assert len(lines) == 1 and lines[0].startswith("SHOPBOT_WEBHOOK_URL=") and "https" in lines[0]


@pytest.mark.parametrize("url", ["http://supplier.example/api", "http://10.0.0.5:8082", "http://[::ffff:8.8.8.8]"])
def test_an_http_supplier_url_is_refused_at_start_unless_loopback(url):
    lines = problems({"SHOPBOT_SUPPLIER_URL": url})
    assert len(lines) == 1 and lines[0].startswith("SHOPBOT_SUPPLIER_URL=") and "https" in lines[0]


@pytest.mark.parametrize("url", ["https://supplier.example/api", "http://127.0.0.1:8082", "http://localhost:1",
                                 "http://[::1]:8082", "http://127.9.9.9"])
def test_an_https_or_loopback_supplier_url_is_accepted(url):    # the control: the guard refuses only the others
    assert config.load({**TOKEN, "SHOPBOT_OWNER_IDS": "1001", "SHOPBOT_SUPPLIER_URL": url}).supplier_url == url


def test_every_problem_is_reported_at_once_and_a_secret_is_never_shown():
    lines = problems({"SHOPBOT_CAPACITY": "0", "SHOPBOT_HTTP_PORT": "99999", "SHOPBOT_WEBHOOK_SECRET": "bad secret!",
                      "SHOPBOT_WEBHOOK_URL": "https://bot.example/telegram/webhook",
                      "SHOPBOT_TILL_TOKENS": "till1:short"})
    assert [line.split("=")[0].split(":")[0] for line in lines] == [
        "SHOPBOT_CAPACITY", "SHOPBOT_HTTP_PORT", "SHOPBOT_WEBHOOK_SECRET", "SHOPBOT_TILL_TOKENS"]
    assert not any("bad secret" in line or "short" in line for line in lines)


@pytest.mark.parametrize("command", [("run",), ("status",), ("migrate",), ("reports",), ("check",), ("shop", "sync"),
                                     ("admit", "--source", "x:1", "--session", "x", "--text", "t")])
def test_formerly_bug_every_command_exits_2_with_one_line_and_no_traceback(tmp_path, command):
    done = shopbot(*command, db=tmp_path / "s.sqlite3", SHOPBOT_HTTP_PORT="99999", SHOPBOT_OWNER_IDS="1001 1002")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "configuration error: SHOPBOT_HTTP_PORT='99999': expected a whole number from -1 to 65,535 (0 picks a free "
        "port, -1 disables the server) (ASCII digits only)",
        "configuration error: SHOPBOT_OWNER_IDS='1001 1002': expected comma-separated positive Telegram user ids of "
        "ASCII digits, e.g. 1001,1002"]


def test_formerly_bug_a_shop_file_with_several_errors_reports_all_of_them_with_their_paths():
    text = (ROOT / "shop.example.toml").read_text()
    text = text.replace('currency = "USD"', 'currency = "dollars"').replace("on_hand = 12", "on_hand = -1", 1)
    assert 'currency = "dollars"' in text and "on_hand = -1" in text
    text = "colour = 'blue'\n" + text + '\n[items.mint]\nunit = "tubs"\non_hand = 4\n'
    with pytest.raises(ShopFileError) as caught:
        parse_shop(text)
    lines = str(caught.value).splitlines()
    assert any(line.startswith("unknown field colour") for line in lines), lines
    assert any(line.startswith("currency must be") for line in lines), lines
    assert any(".on_hand must be a whole number" in line for line in lines), lines
    assert any(line.startswith("items.mint.reorder_point is required") for line in lines), lines
    assert len(lines) >= 4


def test_formerly_bug_an_opening_brief_beside_another_schedule_is_not_a_duplicate():
    """Each [[schedule]] was parsed alone, and each parse added the default opening brief: a shop with its own
    opening_brief and one more schedule was refused as naming opening_brief twice (bench/soak.py's shop)."""
    base = (ROOT / "shop.example.toml").read_text().split("[[schedule]]")[0]
    brief = '[[schedule]]\nname = "opening_brief"\ncron = "0 9 * * *"\nprompt = "brief"\n'
    pulse = '[[schedule]]\nname = "pulse"\ncron = "* * * * *"\nprompt = "stock"\n'
    assert [(s.name, s.cron) for s in parse_shop(base + brief + pulse).schedules] == [
        ("opening_brief", "0 9 * * *"), ("pulse", "* * * * *"), ("weekly_review", "0 8 * * 1")]
    assert [s.name for s in parse_shop(base + pulse).schedules] == [      # the defaults, once
        "pulse", "opening_brief", "weekly_review"]
    assert [s.name for s in parse_shop(base).schedules] == ["opening_brief", "weekly_review"]
    with pytest.raises(ShopFileError, match="'pulse': the name is used by two schedules"):
        parse_shop(base + pulse + pulse)


def test_formerly_bug_run_reports_every_shop_file_error_at_once_with_exit_2(tmp_path):
    bad = tmp_path / "shop.toml"
    bad.write_text("colour = 'blue'\n" + (ROOT / "shop.example.toml").read_text()
                   .replace('currency = "USD"', 'currency = "x"'))
    done = shopbot("run", "--drain", db=tmp_path / "s.sqlite3", SHOPBOT_SHOP_FILE=str(bad))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("configuration error:")]
    assert len(errors) == 2, done.stderr


@pytest.mark.parametrize("value", ["0", "-1", "0.0", "abc", "1e3", "30s", " 30", "3601", "1,5", "."])
def test_a_lease_that_is_not_a_positive_number_of_seconds_is_refused_with_the_others(value):
    lines = problems({"SHOPBOT_LEASE_S": value, "SHOPBOT_CAPACITY": "0"})
    assert [line.split("=")[0] for line in lines] == ["SHOPBOT_CAPACITY", "SHOPBOT_LEASE_S"]
    assert lines[1].startswith(f"SHOPBOT_LEASE_S={value!r}: expected a positive number of seconds")


@pytest.mark.parametrize(("value", "seconds"), [("", 30.0), ("30", 30.0), ("1.5", 1.5), ("3600", 3600.0)])
def test_a_lease_is_a_positive_number_of_seconds_default_30(value, seconds):
    env = {"SHOPBOT_LEASE_S": value} if value else {}
    assert config.load(env).lease_s == seconds


def test_the_worker_runs_the_same_number_of_sessions_at_once_by_default_in_the_product_and_as_a_library():
    from worker.worker import WorkerSettings
    cfg = config.load({"SHOPBOT_OWNER_IDS": "1"})
    assert cfg.worker_concurrency == WorkerSettings().concurrency == 4
