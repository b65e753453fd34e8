"""SHOPBOT_DB may be a postgresql:// URL: kept as text (never a path), its password never shown, redacted from logs."""
from __future__ import annotations

from pathlib import Path

from bot import config
from store import describe_location, is_database_url

URL = "postgresql://shop:s3cret@db.example:5432/shop"


def test_a_postgresql_url_is_kept_as_text_and_a_file_name_is_a_path():
    assert config.load({"SHOPBOT_DB": URL}).db == URL
    assert config.load({"SHOPBOT_DB": "postgres://db/shop"}).db == "postgres://db/shop"
    assert config.load({"SHOPBOT_DB": "./postgresql.sqlite3"}).db == Path("./postgresql.sqlite3")
    assert not is_database_url(Path("postgresql:/db"))       # a path is never taken for a URL either


def test_the_url_password_is_never_shown_and_is_redacted_from_logs():
    cfg = config.load({"SHOPBOT_DB": URL})
    assert cfg.redacted()["db"] == "postgresql://shop:***@db.example:5432/shop"
    assert describe_location(URL) == "postgresql://shop:***@db.example:5432/shop"
    assert "s3cret" in cfg.secrets() and "s3cret" not in repr(cfg)
    assert "s3cret" not in config.load({"SHOPBOT_DB": "postgresql://shop@db/shop"}).secrets()


def test_the_test_servers_url_is_allowed_in_the_environment_but_is_no_setting():
    cfg = config.load({"SHOPBOT_TEST_PG_DSN": "postgresql://postgres@127.0.0.1/postgres"})
    assert isinstance(cfg.db, Path)
