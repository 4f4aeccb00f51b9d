"""The builtin ``portal`` plugin: the web UI of ``soulacy serve`` (docs/portal.md).

It adds its pages and the API routes it needs to the HTTP plugin's server through the hook that
plugin defines, ``soulacy_http_routes``, without importing its private modules: with the HTTP
plugin disabled the portal is simply not served.

- ``GET /`` and ``GET /portal/`` answer the page, ``GET /portal/NAME`` its ES modules, CSS and
  icon, shipped as package data (``static/``): nothing is built at install time and nothing is
  fetched from elsewhere (docs/decisions/0031-portal-without-a-build.md).
- The page talks to ``/api/v1`` as every client does, with the same keys and principals. The
  routes it needed that the API lacked (agents create/read/update, configuration sources,
  plugins, a support bundle, a runs list, a run's timeline, conversations)
  are added here (``_api.py``) and documented in
  ``plugins/http/openapi.json``.
- While it is served, each run's limits (its ``run.limits`` event) are kept in the store for the
  Runs page (``_limits.py``); an admin reconciles an in-progress workflow step from that page.
  Each run's timeline is kept too (``_timeline.py``), each model call with its price.
- A principal's conversations are listed, renamed and deleted on the server
  (``_conversations.py``); today's spend is shown against the budgets (``GET /costs/today``,
  the ``costs`` plugin's route).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import hookimpl

if TYPE_CHECKING:  # the kernel imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import ConfigSection, Kernel
    from soulacy.plugins.http import HttpRoute

__all__: list[str] = []


@hookimpl(optionalhook=True)  # the HTTP plugin's hook: absent when that plugin is disabled
def soulacy_http_routes(kernel: Kernel) -> Sequence[HttpRoute]:
    from soulacy.plugins.http import HttpRoute

    from . import _limits, _timeline
    from ._api import api_routes
    from ._static import StaticFiles

    static = StaticFiles()
    _limits.serve(kernel)  # from now on, each run's limits are kept for Runs
    _timeline.serve(kernel)  # and each run's timeline
    routes: list[Any] = [
        HttpRoute("GET", "/", static.index, auth="none", api=False),
        HttpRoute("GET", "/portal/", static.index, auth="none", api=False),
        HttpRoute(
            "GET", r"/portal/(?P<name>[A-Za-z0-9_-]+\.[a-z]+)", static.file, auth="none", api=False
        ),
        *api_routes(kernel),
    ]
    return routes


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from ._providers import sections

    return sections()


@hookimpl
def soulacy_run_participants(kernel: Kernel) -> list[Any] | None:
    # Only while the portal is served, and calls have a price: each model call's price for
    # the run's timeline (``_timeline.CallPrices``).
    if "http" not in kernel.started:
        return None
    from ._timeline import participants

    return participants(kernel)


@hookimpl
def soulacy_unconfigure(kernel: Kernel) -> None:
    from ._api import detach_errors

    detach_errors(kernel)
