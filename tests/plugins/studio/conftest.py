"""Fixtures of the Studio build tests (helpers live in ``studio_support``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from studio_support import Studio

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


@pytest.fixture
def studio(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> Studio:
    return Studio(workspace, make_kernel)
