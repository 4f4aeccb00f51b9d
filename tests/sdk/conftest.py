"""A live Soulacy server for each SDK test (real HTTP on 127.0.0.1, scripted agents)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio
from sdk_support import DropProxy, LiveServer, tools_plugin, write_agents

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace


@pytest.fixture
async def server(
    make_kernel: Callable[..., Kernel], workspace: Workspace
) -> AsyncIterator[LiveServer]:
    write_agents(workspace)
    kernel = make_kernel(extra_plugins=[tools_plugin()])
    async with open_kernel(kernel=kernel) as running:
        yield LiveServer(running.started["http"][0], running, workspace)


@pytest.fixture
async def proxy(server: LiveServer, nursery: trio.Nursery) -> DropProxy:
    """A dropping proxy in front of ``server``: set ``proxy.cuts``, connect to ``proxy.url``."""
    return await DropProxy(server.url).start(nursery)
