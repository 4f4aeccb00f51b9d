"""The HTTP deadline is the HTTP plugin's limit of the execution policy (``http_timeout``,
declared through ``soulacy_policy_limits``, read from ``runtime.timeouts.http``): it always
carries the run, and a policy that does not hold it still gets one that does."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel
from soulacy.kernel.policy import CORE_LIMITS, ExecutionPolicy, Limit, declared_limits
from soulacy.plugins.http._config import HTTP_TIMEOUT, accommodate, chat_deadline
from soulacy.testing import Workspace, throwaway_plugin

HOURS = 3600.0


def house_policy(agent_id: str, run: float | None = HOURS, **extra: Limit[Any]) -> ExecutionPolicy:
    """A replacement policy's answer: every core limit from the house, ``run`` the run timeout."""
    limits: dict[str, Any] = {name: Limit(None, "house") for name in CORE_LIMITS}
    limits["run_timeout"] = Limit(run, "house")
    return ExecutionPolicy(agent_id, **limits, extra=extra)


def test_the_http_plugin_declares_its_deadline(kernel: Kernel) -> None:
    assert declared_limits(kernel)["http_timeout"] is HTTP_TIMEOUT
    assert (HTTP_TIMEOUT.path, HTTP_TIMEOUT.default, HTTP_TIMEOUT.duration) == (
        "runtime.timeouts.http",
        48 * HOURS + 60,
        True,
    )


@pytest.mark.parametrize(
    ("http", "run", "expected"),
    [
        pytest.param(Limit(2 * HOURS, "config.yaml"), HOURS, Limit(2 * HOURS, "config.yaml")),
        pytest.param(
            Limit(HOURS, "config.yaml"),
            HOURS,
            Limit(
                HOURS + 60,
                "accommodates run",
                None,
                "raised to the run timeout plus one minute to carry the run",
            ),
            id="equal is raised",
        ),
        pytest.param(
            Limit(HOURS, "default"),
            None,
            Limit(None, "accommodates run", None, "raised to unlimited to carry an unlimited run"),
            id="an unlimited run",
        ),
        pytest.param(Limit(None, "config.yaml"), 5 * HOURS, Limit(None, "config.yaml")),
    ],
)
def test_the_deadline_carries_the_run(
    http: Limit[Any], run: float | None, expected: Limit[Any]
) -> None:
    assert accommodate(http, house_policy("a", run)) == expected


@pytest.mark.parametrize(
    ("held", "run", "seconds"),
    [
        pytest.param(Limit(90.0, "house"), HOURS, 90.0, id="the policy's"),
        pytest.param(Limit(None, "house"), HOURS, math.inf, id="unlimited"),
        pytest.param(None, HOURS, 48 * HOURS + 60, id="not held: the default"),
        pytest.param(None, 72 * HOURS, 72 * HOURS + 60, id="not held: carrying the run"),
        pytest.param(None, None, math.inf, id="not held: carrying an unlimited run"),
    ],
)
def test_the_chat_deadline(held: Limit[Any] | None, run: float | None, seconds: float) -> None:
    extra = {"http_timeout": held} if held is not None else {}
    assert chat_deadline(house_policy("a", run, **extra)) == seconds


async def test_a_replacement_policy_without_the_limit_still_serves_chats(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    house = throwaway_plugin(
        "house", soulacy_resolve_policy=lambda agent_id: house_policy(agent_id)
    )
    options = {"plugins": ["no:policy", "no:reasoning", "no:costs"], "extra_plugins": [house]}
    async with open_server(make_kernel, **options) as server, server.client() as client:
        response = await client.post("/chat", json={"agent_id": "echo", "text": "hi"})
        assert response.status_code == 200, response.text
        assert response.json()["reply"] == "hello there"
        prep = (await client.get("/agents/echo/preparation")).json()
    assert "http_timeout" not in prep["policy"]
