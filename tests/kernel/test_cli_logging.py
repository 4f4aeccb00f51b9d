"""``--log-level``: the records of soulacy's loggers on stderr, the root logger untouched."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from soulacy.cli import main
from soulacy.testing import Workspace

PLUGIN = (
    "import logging\n"
    "from soulacy.kernel import CliCommand\n"
    "log = logging.getLogger('soulacy.chatty')\n"
    "def talk(args, ctx):\n"
    "    log.debug('a debug record')\n"
    "    log.info('an info record')\n"
    "    log.warning('a warning record')\n"
    "def soulacy_cli_commands():\n"
    "    return [CliCommand('talk', 'logs three records', talk)]\n"
)


@pytest.fixture
def talk(workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    (tmp_path / "chatty_log_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return ["--workspace", str(workspace.path), "-p", "chatty_log_mod"]


def test_warnings_are_shown_by_default(talk: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*talk, "talk"], environ={}) == 0
    err = capsys.readouterr().err
    assert "soulacy: WARNING: soulacy.chatty: a warning record" in err
    assert "info record" not in err


def test_log_level_shows_lower_levels(talk: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--log-level", "info", *talk, "talk"], environ={}) == 0
    err = capsys.readouterr().err
    assert "soulacy: INFO: soulacy.chatty: an info record" in err
    assert "debug record" not in err
    assert main(["--log-level", "ERROR", *talk, "talk"], environ={}) == 0
    assert "record" not in capsys.readouterr().err


def test_the_environment_sets_the_level_and_the_option_wins(
    talk: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*talk, "talk"], environ={"SOULACY_LOG_LEVEL": "debug"}) == 0
    assert "a debug record" in capsys.readouterr().err
    env = {"SOULACY_LOG_LEVEL": "debug"}
    assert main(["--log-level", "warning", *talk, "talk"], environ=env) == 0
    assert "debug record" not in capsys.readouterr().err


def test_the_logger_is_put_back_after_main(
    talk: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    logger = logging.getLogger("soulacy")
    before = (logger.level, list(logger.handlers), logging.getLogger().level)
    main(["--log-level", "debug", *talk, "talk"], environ={})
    capsys.readouterr()
    assert (logger.level, list(logger.handlers), logging.getLogger().level) == before


def test_an_unknown_level_is_a_usage_error(
    talk: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--log-level", "loud", *talk, "talk"], environ={}) == 2
    assert "'loud' is not a log level" in capsys.readouterr().err
