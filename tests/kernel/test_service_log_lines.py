"""A long-running process says, at info, which services started and stopped, in the one log
format of the command line (docs/cli.md): ``soulacy: INFO: soulacy.kernel: service 'x' ...``."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.serve_nodes import serving, start

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes


def test_serve_logs_each_service_starting_and_stopping(
    workspace: Workspace, tmp_path: Path
) -> None:
    workspace.write_config("")
    node = start(workspace, "one", tmp_path, {"SOULACY_LOG_LEVEL": "info"})
    with serving([node]):
        pass
    lines = node.log.read_text().splitlines()
    assert "soulacy: INFO: soulacy.kernel: service 'http' started" in lines
    assert "soulacy: INFO: soulacy.kernel: service 'http' stopped" in lines
