"""Fixtures of the portal's tests (helpers: portal_support.py)."""

from __future__ import annotations

import pytest
from portal_support import add_agents, advanced_config

from soulacy.testing import Workspace


@pytest.fixture
def keyed(workspace: Workspace) -> Workspace:
    """The advanced config.yaml and two agents."""
    workspace.write_config(advanced_config())
    add_agents(workspace)
    return workspace
