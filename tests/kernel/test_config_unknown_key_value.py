"""An unknown key's value is shown unless its name is a secret's (issue 38, observation 7):
``bogus_key: 1`` was reported as ``(got '***')`` because any name ending in ``key`` counts as
a secret. Numbers and booleans are never secrets; strings under secret-looking names stay
masked."""

from __future__ import annotations

import pytest

from soulacy.cli import main
from soulacy.testing import Workspace

Capture = pytest.CaptureFixture[str]


def _validate(workspace: Workspace, capsys: Capture) -> tuple[int, str]:
    code = main(["--workspace", str(workspace.path), "config", "validate"], environ={})
    out, err = capsys.readouterr()
    return code, out + err


def test_an_unknown_key_with_a_number_shows_its_value(
    workspace: Workspace, capsys: Capture
) -> None:
    workspace.write_config("bogus_key: 1\nruntime:\n  signing_key: true\n")
    code, text = _validate(workspace, capsys)
    assert code == 2, text
    assert "bogus_key: " in text, text
    assert "(got 1)" in text, f"expected the number shown, got {text!r}"
    assert "(got True)" in text, f"expected the boolean shown, got {text!r}"
    assert "***" not in text, text


def test_an_unknown_key_with_a_string_under_a_secret_name_stays_masked(
    workspace: Workspace, capsys: Capture
) -> None:
    workspace.write_config("bogus_key: sk-not-shown-123456\nbogus_note: plain words\n")
    code, text = _validate(workspace, capsys)
    assert code == 2, text
    assert "sk-not-shown-123456" not in text, text
    assert "'***'" in text, text
    assert "'plain words'" in text, f"expected a plain string shown, got {text!r}"


def test_a_number_under_a_secret_mapping_stays_masked(
    workspace: Workspace, capsys: Capture
) -> None:
    workspace.write_config("server:\n  api_keys:\n    alice: 12345\n")
    code, text = _validate(workspace, capsys)
    assert code == 2, text
    assert "12345" not in text, text
