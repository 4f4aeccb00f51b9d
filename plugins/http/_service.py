"""The HTTP service: hypercorn's Trio worker in the kernel's nursery."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import trio

from soulacy.kernel import Kernel

from ._app import Api
from ._config import ServerConfig
from ._runlog import RunLogs
from ._shared import Publisher
from ._tokens import EventTokens, shared_secret

if TYPE_CHECKING:  # imported when the service starts: `soulacy --help` need not load hypercorn
    import hypercorn.config


class HttpService:
    """The HTTP API. When the kernel stops it drains (docs/http.md#when-the-server-stops): new
    runs are refused with 503, the runs it started get ``server.shutdown_grace`` to finish, and
    those still running then end ``interrupted`` (``shutdown``), which their streams' ``result``
    says; then the listener closes."""

    name = "http"

    def __init__(self, kernel: Kernel, config: ServerConfig, logs: RunLogs) -> None:
        self.kernel = kernel
        self.config = config
        self.api = Api(kernel, config, logs)
        self._closing = trio.Event()  # the runs have ended: the listener may close

    @property
    def drain_seconds(self) -> float:
        """How long a stop may wait for the runs (``server.shutdown_grace``): open_kernel adds
        it to its grace period."""
        return float(self._grace())

    def _grace(self) -> float:
        config: ServerConfig = self.kernel.config.section("server")  # a PATCH applies
        return float(config.shutdown_grace.seconds)

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        import hypercorn.config

        config = hypercorn.config.Config()
        config.bind = [f"{self.config.host}:{self.config.port}"]
        config.accesslog = None
        config.graceful_timeout = 1.0
        if not self.config.api_keys and not self.config.api_key:
            print(
                "soulacy: warning: server.api_keys is empty: the HTTP API serves loopback"
                " clients only, with full access. Set keys before exposing it.",
                file=sys.stderr,
                flush=True,
            )
        if self.api.shared and not self.api.principals.keyless:  # tokens good on every process
            secret = await shared_secret(self.kernel)
            self.api.tokens = EventTokens(self.config.stream_token_ttl, secret=secret)
        try:
            async with trio.open_nursery() as sharing:
                self.api.background = sharing  # readiness checks (they outlive /ready's wait)
                if self.api.shared:  # other processes on the store serve these runs' streams
                    publisher = Publisher(self.kernel.store(), self.config.events_per_run)
                    self.api.logs.publish = publisher.add
                    sharing.start_soon(publisher.run)
                async with trio.open_nursery() as server:
                    binds = await server.start(self._serve_http, config)
                    try:
                        async with trio.open_nursery() as runs:
                            self.api.runs = runs  # runs outlive the requests that started them
                            task_status.started([b.replace("0.0.0.0", "127.0.0.1") for b in binds])
                            await self.kernel.stopping.wait()
                            # New runs get 503 from here on; the open ones get the grace.
                            with trio.move_on_after(self._grace()):
                                await self.api.drained()
                            # What still runs ends "interrupted" (the kernel is stopping):
                            # stored unfinished, its streams told so, resumable by its id.
                            runs.cancel_scope.cancel()
                    finally:
                        self.api.runs = None
                        # The runs' results are in their logs: their streams write them,
                        # then the listener closes (hypercorn's graceful_timeout for them).
                        self._closing.set()
                sharing.cancel_scope.cancel()  # after the runs' last events: written first
        finally:
            self.api.background = None

    async def _serve_http(
        self,
        config: hypercorn.config.Config,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        import hypercorn.trio

        await hypercorn.trio.serve(
            self.api,  # type: ignore[arg-type]  # a plain ASGI callable with looser types
            config,
            shutdown_trigger=self._closing.wait,
            task_status=task_status,
        )
