"""Fixtures of the portal's tests (helpers: portal_support.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from portal_support import add_agents, advanced_config

from soulacy.testing import Workspace


@pytest.fixture
def keyed(workspace: Workspace) -> Workspace:
    """The advanced config.yaml and two agents."""
    workspace.write_config(advanced_config())
    add_agents(workspace)
    return workspace


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where a test saves the screenshots docs/portal.md shows: $SOULACY_PORTAL_SCREENSHOTS
    (tests/plugins/portal/screenshots to refresh them), or the test's temporary folder."""
    folder = Path(os.environ.get("SOULACY_PORTAL_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
