"""The deployment files: the systemd unit passes `systemd-analyze verify` (where that command exists) with the
settings an operator expects, and the Containerfile builds from files that exist, runs as a non-root user with the
database on a volume. No container engine runs here, so the image itself is not built by the tests."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "shopbot.service"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
ANALYZE = shutil.which("systemd-analyze")
NO_ANALYZE = "systemd-analyze is not installed here: the unit file's verify check is skipped"


def settings(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def verify(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    """systemd-analyze verify on a copy whose commands point at this checkout's shopbot (verify wants them to
    exist and be executable)."""
    shopbot = Path(sys.executable).parent / "shopbot"
    unit = tmp_path / "shopbot.service"
    unit.write_text(text.replace("/opt/shopbot/bin/shopbot", str(shopbot)))
    return subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True, cwd=tmp_path)


def test_the_unit_has_what_an_operator_expects():
    unit = settings(UNIT.read_text())
    assert unit["Restart"] == ["on-failure"] and unit["KillSignal"] == ["SIGTERM"]
    assert unit["EnvironmentFile"] == ["/etc/shopbot/shopbot.env"] and unit["User"] == ["shopbot"]
    assert "SHOPBOT_DB=/var/lib/shopbot/shopbot.sqlite3" in unit["Environment"]
    assert unit["ExecStart"] == ["/opt/shopbot/bin/shopbot run"]
    assert unit["ExecStartPre"] == ["/opt/shopbot/bin/shopbot migrate"]
    for hardening in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
                      "RestrictAddressFamilies", "SystemCallFilter", "CapabilityBoundingSet"):
        assert hardening in unit, hardening
    assert unit["ProtectSystem"] == ["strict"] and unit["StateDirectory"] == ["shopbot"]
    assert int(unit["LimitNOFILE"][0]) >= 4 * 256 and unit["UMask"] == ["0077"]     # above bot/http.py's cap


@pytest.mark.skipif(ANALYZE is None, reason=NO_ANALYZE)
def test_systemd_analyze_verifies_the_unit(tmp_path):
    result = verify(tmp_path, UNIT.read_text())
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


@pytest.mark.skipif(ANALYZE is None, reason=NO_ANALYZE)
def test_systemd_analyze_catches_a_broken_unit(tmp_path):
    """Negative control: the same check fails on a unit with a bad value."""
    result = verify(tmp_path, UNIT.read_text().replace("Restart=on-failure", "Restart=sometimes")
                    .replace("KillSignal=SIGTERM", "KillSignal=SIGNOPE"))
    assert result.returncode != 0 or "Failed to parse" in result.stderr, result.stderr


def test_the_containerfile_runs_shopbot_as_non_root_with_the_database_on_a_volume():
    text = CONTAINERFILE.read_text()
    assert re.search(r"^FROM \S*python:3\.1\d-slim$", text, flags=re.M)
    users = re.findall(r"^USER (\S+)$", text, flags=re.M)
    assert users and users[-1] not in ("root", "0")
    assert 'VOLUME ["/data"]' in text and "SHOPBOT_DB=/data/shopbot.sqlite3" in text
    assert "STOPSIGNAL SIGTERM" in text and "shopbot migrate && exec shopbot run" in text
    for source in re.findall(r"^COPY (.+) \S+$", text, flags=re.M):
        for name in source.split():
            assert (ROOT / name).exists(), f"the Containerfile copies {name}, which is not in the repository"


def test_the_logrotate_rule_needs_no_copytruncate():
    text = (ROOT / "deploy" / "logrotate.conf").read_text()
    rule = text[text.index("{"):]
    assert "copytruncate" not in rule and "rotate 14" in rule
    assert "WatchedFileHandler" in (ROOT / "bot" / "logs.py").read_text()


def locked() -> dict[str, str]:
    """requirements.lock as {name: version} (names normalised as pip does)."""
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.split(";")[0].strip().partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_every_dependency_has_an_upper_bound_and_an_exact_locked_version():
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    requirements = project["project"]["dependencies"] + extras["test"] + extras["models"] + extras["postgres"]
    pins = locked()
    for requirement in requirements + extras["bench"] + project["build-system"]["requires"]:
        assert "<" in requirement, f"{requirement} has no upper bound"
    for requirement in requirements:
        name = re.sub(r"[-_.]+", "-", re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]).lower()
        assert name in pins and re.fullmatch(r"\d+(\.\w+)*", pins[name]), f"{name} is not locked"


def test_the_image_and_the_test_path_install_from_the_lock_and_the_image_has_tzdata():
    text = CONTAINERFILE.read_text()
    assert "pip install -c requirements.lock ." in text and "tzdata" in text
    assert "-c requirements.lock -e '.[test]'" in (ROOT / "Makefile").read_text()


def test_the_lock_is_the_environment_the_tests_run_in():
    """The versions installed here (by `make`, from the lock) are the locked ones."""
    from importlib import metadata
    for name, version in locked().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue                        # another platform's or Python's package (markers)
        assert installed == version, f"{name} {installed} installed, {version} locked"
