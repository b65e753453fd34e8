"""The docs stay honest: every CLI command has help and is in the README; .env.example lists every config key."""
from __future__ import annotations

import re

import pytest

from bot import config
from bot.cli.commands import COMMANDS, build_parser
from tests.support import ROOT


def test_every_command_is_documented_with_help():
    readme = (ROOT / "README.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in COMMANDS:
        assert f"`shopbot {name}" in readme, f"shopbot {name} is not in the README"
        assert sub.choices[name].description, f"shopbot {name} has no help"


def test_env_example_matches_the_config_keys():
    text = (ROOT / ".env.example").read_text()
    keys = re.findall(r"^([A-Z_]+)=", text, flags=re.M)
    assert keys == list(config.KEYS)


def test_unknown_keys_and_bad_values_are_refused():
    with pytest.raises(config.ConfigError, match="SHOPBOT_CAPACTY"):
        config.load({"SHOPBOT_CAPACTY": "5"})
    with pytest.raises(config.ConfigError, match="SHOPBOT_CAPACITY"):
        config.load({"SHOPBOT_CAPACITY": "lots"})
    with pytest.raises(config.ConfigError, match="WEBHOOK_SECRET"):
        config.load({"SHOPBOT_WEBHOOK_URL": "https://x/telegram/webhook"})
    with pytest.raises(config.ConfigError, match="TEST_MODE"):
        config.load({"SHOPBOT_CLOCK": "accelerated:2027-01-01T00:00:00Z:60"})
    with pytest.raises(config.ConfigError, match="fault point"):
        config.load({"SHOPBOT_FAULT": "K99:kill"})


def test_secrets_never_show(tmp_path):
    cfg = config.load({"TELEGRAM_BOT_TOKEN": "123:abcdef", "SHOPBOT_MODEL_API_KEY": "sk-secret",
                       "SHOPBOT_OWNER_IDS": "1"})
    assert "abcdef" not in repr(cfg) and "sk-secret" not in repr(cfg)
    assert cfg.redacted()["telegram_token"] == "****"


def test_dotenv_is_read_and_the_environment_wins(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("SHOPBOT_CAPACITY=7\nSHOPBOT_ATTEMPT_CAP='4'\n# a comment\n")
    monkeypatch.setenv("SHOPBOT_CAPACITY", "9")
    env = config.environment(tmp_path)
    cfg = config.load(env)
    assert cfg.capacity == 9 and cfg.attempt_cap == 4
