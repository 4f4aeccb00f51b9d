"""The kernel: plugins, configuration and services of one workspace, and nothing more."""

from __future__ import annotations

import inspect
import logging
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs
import trio

from ._config import OwnedSection, Settings, load_settings
from ._errors import (
    ConfigError,
    ConfigIssue,
    Location,
    PluginError,
    UsageError,
)
from ._events import EventStream
from ._loading import (
    AGENT_FILE,
    AGENTS_DIR,
    CONFIG_FILE,
    LoadedPlugins,
    load_plugins,
)
from ._manager import SoulacyPluginManager
from ._providers import ProviderRegistry, ProviderType
from ._runs import LeaseKeeper, RunHandle, Runner, RunRequest, RunResult
from ._stash import Stash
from ._store import LeaseOwner, Store
from ._yamlio import load_yaml_file

if TYPE_CHECKING:
    from .policy import ExecutionPolicy

DEFAULT_GRACE_PERIOD = 5.0

log = logging.getLogger("soulacy.kernel")


class Service(Protocol):
    """A long-lived task contributed through ``soulacy_services`` (a transport, a scheduler).

    A service that runs need wherever they run (the ``mcp`` plugin's servers) also says
    ``needed_by_runs = True``: ``soulacy run`` and ``soulacy demo`` start those, and only those
    (``open_kernel(services="runs")``), so that a one-off run serves no port and ticks no
    schedule.
    """

    name: str

    async def serve(self, *, task_status: trio.TaskStatus[Any] = ...) -> None:
        """Call ``task_status.started()`` once ready, optionally with what callers need (such as
        the bound addresses); return by itself once ``kernel.stopping`` is set, at once when
        idle (await it, never ``trio.sleep_forever()``: what still runs after the grace period is
        cancelled, and every stop waits that long). ``check_service_stops`` checks a service.

        A service with work to drain first (the ``http`` plugin's runs, for
        ``server.shutdown_grace``) says how long it may take with an optional attribute
        ``drain_seconds`` (a float, read when the kernel stops): ``open_kernel`` adds the
        largest of its services' to the grace period. Idle, it still returns at once."""


@attrs.frozen
class AgentSpec:
    """One agent's SOUL.yaml, validated against every loaded plugin's agent keys."""

    id: str
    settings: Settings

    @property
    def file(self) -> Path:
        return self.settings.file

    def section(self, key: str) -> Any:
        return self.settings.section(key)

    def is_set(self, path: str) -> bool:
        return self.settings.is_set(path)

    def item_location(self, key: str, index: int) -> Location:
        """Where item ``index`` of the list ``key`` is written in this SOUL.yaml (the settings
        keep the positions of keys, not of list items); else where ``key`` is."""
        try:
            line, column = load_yaml_file(self.file)[key].lc.item(index)
        except (OSError, LookupError, TypeError, AttributeError, UsageError):
            return self.settings.source_of(key) or Location(str(self.file))
        return Location(str(self.file), line + 1, column + 1)


class Kernel:
    """Plugins, configuration and the event stream of one workspace.

    Build one with :meth:`Kernel.load`, or with :func:`open_kernel` to also run its services.
    """

    def __init__(
        self,
        workspace: Path,
        pm: SoulacyPluginManager,
        sections: Sequence[OwnedSection],
        config: Settings,
        environ: Mapping[str, str],
    ) -> None:
        self.workspace = workspace
        self.pm = pm
        self.hook = pm.hook
        self.config = config
        self.environ = environ
        self.sections = tuple(sections)
        self.events = EventStream(self)
        self.stopping = trio.Event()
        # What each running service handed to task_status.started() (an HTTP server's URLs).
        self.started: dict[str, Any] = {}
        # Per-kernel plugin state (as pytest's config.stash): plugins keep theirs here under a
        # StashKey of their own, never in a module-level dictionary keyed by kernel.
        self.stash = Stash()
        self._agents: dict[str, AgentSpec] = {}
        self._provider_types: tuple[list[Any], dict[str, ProviderType]] | None = None
        self.read_only = False  # a read command's kernel: stores create and change no file
        # The only agents this kernel is opened to run (``soulacy run``, ``demo``, ``config
        # validate`` set it before opening): a service that starts something per agent (the
        # mcp plugin's servers) starts only what these use. None: any agent may run.
        self.agents_to_run: frozenset[str] | None = None
        # Set while ``config validate`` asks for each agent's tools on a kernel whose services
        # do not run: a plugin whose tools come from a service offers stand-ins under the
        # names the agent lists, and raises nothing for the service not running.
        self.validating = False
        # The kernel's nursery while it is open (open_kernel): its background work runs there,
        # each task in a cancel scope of its own, cancelled once the services have stopped.
        self._nursery: trio.Nursery | None = None
        self._background: set[trio.CancelScope] = set()
        self._runner: Runner | None = None  # asked for on first use
        self._providers: ProviderRegistry | None = None  # asked for on first use
        self._store: Store | None = None
        # Identifies this kernel as the owner of leases (runs, steps, schedules) in shared stores.
        self.owner = LeaseOwner.current(uuid.uuid4().hex)

    # -- loading -----------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        workspace: str | os.PathLike[str] | None = None,
        *,
        plugins: Sequence[str] = (),
        builtins: Iterable[str] | None = None,
        autoload: bool | None = None,
        extra_plugins: Sequence[object] = (),
        environ: Mapping[str, str] | None = None,
        trace: bool | None = None,
    ) -> Kernel:
        """Load plugins and validate the workspace configuration.

        ``plugins`` are ``-p`` values (``NAME`` or ``no:NAME``); ``builtins`` limits which builtin
        plugins load (None: all); ``autoload`` loads entry-point plugins (default: unless
        ``SOULACY_DISABLE_PLUGIN_AUTOLOAD`` is set); ``extra_plugins`` are objects registered as
        they are (tests use this for throwaway plugins).
        """
        loaded = load_plugins(
            workspace,
            plugins=plugins,
            builtins=builtins,
            autoload=autoload,
            extra_plugins=extra_plugins,
            environ=environ,
            trace=trace,
        )
        return cls.from_plugins(loaded)

    @classmethod
    def from_plugins(cls, loaded: LoadedPlugins) -> Kernel:
        """Validate the configuration against already loaded plugins and configure them."""
        # Validating the whole file finds the plugins section's problems again, with the rest.
        config = load_settings(
            loaded.config_file,
            loaded.doc,
            loaded.sections,
            scope="workspace",
            environ=loaded.environ,
        )
        kernel = cls(loaded.root, loaded.pm, loaded.sections, config, loaded.environ)
        kernel._check_config(config)
        # Historic: a plugin registered after this still gets configured for this kernel.
        loaded.pm.hook.soulacy_configure.call_historic(kwargs={"kernel": kernel})
        return kernel

    def sibling(self, workspace: Path) -> Kernel:
        """A kernel on ``workspace`` with this kernel's plugins and validated configuration,
        configured for itself (studio's scratch kernels for check runs).

        Its ``soulacy_configure`` call goes through the manager's hook execution but is not
        kept in the hook's history: a plugin registered later is configured for the kernels
        that last, not for every short-lived sibling.
        """
        kernel = Kernel(workspace, self.pm, self.sections, self.config, self.environ)
        self.pm.call_unrecorded("soulacy_configure", kernel=kernel)
        return kernel

    # -- configuration -----------------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        return self.workspace / CONFIG_FILE

    def validate_config(
        self, doc: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Validate a config.yaml document against the loaded plugins' sections and rules."""
        config = load_settings(
            self.config_file,
            doc,
            self.sections,
            scope="workspace",
            environ=self.environ if environ is None else environ,
        )
        self._check_config(config)
        return config

    def _check_config(self, config: Settings) -> None:
        issues = [
            i
            for found in self.hook.soulacy_validate_config(kernel=self, config=config)
            for i in found or ()
        ]
        if issues:
            raise ConfigError(issues)

    def update_config(self, changes: Mapping[str, Any]) -> list[str]:
        """Save changed fields of config.yaml and return the dotted keys that changed.

        ``changes`` maps dotted keys (or nested mappings) to values; a mapping merges into the
        saved section instead of replacing it, so a basic edit never resets other saved values.
        Everything is validated before writing; the write is atomic, and on any error the file
        stays byte-for-byte as it was. The ``soulacy_save_config`` hook writes (the builtin
        ``core`` plugin, with :mod:`soulacy.plugins.yamledit`).
        """
        changed: list[str] | None = self.hook.soulacy_save_config(kernel=self, changes=changes)
        if changed is None:
            raise PluginError(
                "no plugin saves the configuration (hook soulacy_save_config; the builtin"
                " 'core' answers): is it disabled?"
            )
        return changed

    # -- agents ------------------------------------------------------------------------------

    def agent_ids(self) -> list[str]:
        folder = self.workspace / AGENTS_DIR
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if (p / AGENT_FILE).is_file())

    def agent(self, agent_id: str) -> AgentSpec:
        """The validated SOUL.yaml of ``agent_id`` (loaded once, then cached)."""
        if agent_id in self._agents:
            return self._agents[agent_id]
        path = self.workspace / AGENTS_DIR / agent_id / AGENT_FILE
        if "/" in agent_id or agent_id.startswith(".") or not path.is_file():
            known = ", ".join(self.agent_ids()) or "none"
            raise UsageError(
                f"no agent {agent_id!r} in workspace {str(self.workspace)!r}"
                f" (expected {AGENTS_DIR}/{agent_id}/{AGENT_FILE}; known agents: {known})"
            )
        spec = self.check_agent(agent_id, load_yaml_file(path), path)
        self._agents[agent_id] = spec
        return spec

    def forget_agent(self, agent_id: str) -> None:
        """Drop the loaded copy of an agent, so that its next use reads its SOUL.yaml again
        (after an editor saved it)."""
        self._agents.pop(agent_id, None)

    def check_agent(self, agent_id: str, doc: Mapping[str, Any], file: Path) -> AgentSpec:
        """Validate an agent document (a parsed SOUL.yaml) as the loaded plugins do, without
        saving it; raises one ConfigError with every problem. Studio builds use this."""
        settings = load_settings(file, doc, self.sections, scope="agent")
        declared = settings.get("id") if settings.is_set("id") else None
        spec = AgentSpec(agent_id, settings)
        issues = []
        if declared is not None and declared != agent_id:
            loc = settings.source_of("id") or Location(str(file))
            message = f"does not match the folder name {agent_id!r}"
            issues.append(ConfigIssue(loc, "id", message, declared, True))
        issues += [
            i
            for found in self.hook.soulacy_validate_agent(kernel=self, agent=spec)
            for i in found or ()
        ]
        if issues:
            raise ConfigError(issues)
        return spec

    def validate_all(self) -> list[str]:
        """Validate every agent file; returns warnings, raises one ConfigError for all problems."""
        issues, warnings = [], list(self.config.warnings)
        for agent_id in self.agent_ids():
            try:
                warnings.extend(self.agent(agent_id).settings.warnings)
            except ConfigError as exc:
                issues.extend(exc.issues)
        if issues:
            raise ConfigError(issues)
        return warnings

    def resolve_policy(
        self, agent_id: str, overrides: Mapping[str, Any] | None = None
    ) -> ExecutionPolicy:
        """The execution policy of a run of ``agent_id``, every value with its source.

        Asks the ``soulacy_resolve_policy`` hook (the builtin ``policy`` plugin by default).
        """
        policy: ExecutionPolicy | None = self.hook.soulacy_resolve_policy(
            kernel=self, agent_id=agent_id, overrides={} if overrides is None else overrides
        )
        if policy is None:
            raise PluginError(
                "no loaded plugin resolves execution policy"
                " (is the builtin 'policy' plugin disabled?)"
            )
        return policy

    # -- runs ------------------------------------------------------------------------------

    async def run(self, agent_id: str, text: str, **options: Any) -> RunResult:
        """Run one request of a conversation and return how it ended.

        ``options`` are the other fields of :class:`RunRequest` (``session_id``, ``run_id``,
        ``overrides``, ``stream`` …). Limits, timeouts and cancellation end the run with an
        honest status rather than an exception; a parent's cancellation still propagates.
        """
        return await self.runner().run(RunRequest(agent_id, text, **options))

    async def continue_run(
        self,
        run_id: str,
        text: str = "",
        *,
        overrides: Mapping[str, Any] | None = None,
        stream: bool = False,
        reservation: RunHandle | None = None,
    ) -> RunResult:
        """Continue a run that ended ``incomplete`` in place, as its next attempt, ``text``
        as a steering message and ``overrides`` as this attempt's limits (see
        :meth:`Runner.continue_run <soulacy.kernel.engine.Runner.continue_run>`). Raises
        :class:`RunNotContinuable` for a run that is not stored or not incomplete."""
        return await self.runner().continue_run(
            run_id, text, overrides=overrides, stream=stream, reservation=reservation
        )

    def cancel_run(self, run_id: str, reason: str = "cancelled") -> bool:
        """Cancel the run with this id in this kernel, running or queued; False when there is
        none."""
        return self.runner().cancel_run(run_id, reason) > 0

    async def request_cancel(self, run_id: str, reason: str = "cancelled") -> bool:
        """Cancel the run with this id wherever it runs: here, or in another process sharing
        the store (it stops within ``leases.cancel_poll``). False when no live run has it."""
        return await self.runner().request_cancel(run_id, reason)

    def runner(self) -> Runner:
        """What runs this kernel's runs (``soulacy_runner``: the essential ``engine`` plugin),
        asked once. Besides what the methods above forward, transports reserve run ids with it
        (``reserve``, ``release``), and it cancels a conversation's runs and says which tools a
        run of an agent is offered (``tools_for``)."""
        if self._runner is None:
            found = self.hook.soulacy_runner(kernel=self)
            if found is None:
                raise PluginError(
                    "no loaded plugin answered soulacy_runner (what runs runs; the builtin"
                    " 'engine' plugin is essential: was it blocked from loading?)"
                )
            self._runner = found
        return self._runner

    @property
    def leases(self) -> LeaseKeeper:
        """The kernel's leases in the store (the runner's keeper renews them)."""
        return self.runner().leases

    def store(self) -> Store:
        """The store of everything a run keeps (``soulacy_store``), asked once; no answer is a
        PluginError: a run must never believe it stored what nothing keeps."""
        if self._store is None:
            found = self.hook.soulacy_store(kernel=self)
            if found is None:
                raise PluginError(
                    "no loaded plugin answered soulacy_store (the store; are the builtin"
                    " 'sqlite_store' and 'memory_store' plugins disabled? load a store plugin)"
                )
            self._store = found
        return self._store

    # -- providers ---------------------------------------------------------------------------

    def provider_types(self) -> dict[str, ProviderType]:
        # Asked on every run (policy resolution, the model's capacity): collected again only
        # when the plugins implementing the hook change (it takes no arguments).
        impls = self.hook.soulacy_provider_types.get_hookimpls()
        known = self._provider_types
        if known is not None and known[0] == impls:
            return dict(known[1])
        found = self.pm.unique_contributions("soulacy_provider_types", "provider type")
        types: dict[str, ProviderType] = {name: kind for name, (kind, _) in found.items()}
        self._provider_types = (impls, types)
        return dict(types)

    @property
    def providers(self) -> ProviderRegistry:
        """The provider registry (``soulacy_provider_registry``; the builtin ``providers``
        plugin by default), asked for once and closed with the kernel."""
        if self._providers is None:
            registry = self.hook.soulacy_provider_registry(kernel=self)
            if registry is None:
                raise PluginError(
                    "no loaded plugin answered soulacy_provider_registry (model providers;"
                    " is the builtin 'providers' plugin disabled? load a plugin that"
                    " implements it)"
                )
            self._providers = registry
        return self._providers

    async def aclose(self) -> None:
        """Close what the kernel opened for its runs: provider connections, then whatever
        plugins opened (``soulacy_unconfigure``: the SQLite plugin closes its store). First, one
        last attempt at the run outcomes the store refused (the runner's ``aclose``)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.aclose()
        registry, self._providers = self._providers, None
        if registry is not None:
            await registry.aclose()
        self._store = None  # asked again if the kernel is used after this
        # Plugin by plugin, last registered first (as pluggy calls them), so that one plugin
        # failing to close, sync or async, does not keep the others open.
        callers = [call for _, call in self.pm.plugin_callers("soulacy_unconfigure")]
        await call_each(reversed(callers), kernel=self)

    # -- background work -----------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether the kernel is open (:func:`open_kernel`): its nursery hosts background work."""
        return self._nursery is not None

    def start_soon(
        self, async_fn: Callable[..., Awaitable[object]], *args: object, name: str | None = None
    ) -> bool:
        """Start kernel-scoped background work (a lease keeper, a checkpointer, a listener) in
        the kernel's nursery, while the kernel is open; False when it is not (do the work in
        the caller's own nursery, or inline). The work runs until it returns or, once the
        services have stopped, is cancelled; ``open_kernel`` waits for it, and an exception
        it raises comes out of ``open_kernel`` (decision 0062): work that must outlive a
        failure catches what it expects, never everything."""
        nursery = self._nursery
        if nursery is None:
            return False
        nursery.start_soon(self._run_background, async_fn, args, name=name or async_fn)
        return True

    async def _run_background(
        self, async_fn: Callable[..., Awaitable[object]], args: tuple[object, ...]
    ) -> None:
        with trio.CancelScope() as scope:
            self._background.add(scope)
            try:
                await async_fn(*args)
            finally:
                self._background.discard(scope)

    def _stop_background(self) -> None:
        self._nursery = None  # what asks from now on does its work itself
        for scope in list(self._background):
            scope.cancel()

    # -- services ----------------------------------------------------------------------------

    def services(self) -> list[Service]:
        found: list[Service] = []
        for contributed in self.hook.soulacy_services(kernel=self):
            found.extend(contributed or ())
        return found


async def call_each(callers: Iterable[Callable[..., Sequence[Any]]], **kwargs: Any) -> None:
    """Call each hook caller and await what is awaitable among its results ("await me maybe").
    Every caller runs even when an earlier one fails (sync or async); the first failure is
    raised once all have run."""
    failure: Exception | None = None
    for call in callers:
        try:
            for result in call(**kwargs):
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


@asynccontextmanager
async def open_kernel(
    workspace: str | os.PathLike[str] | None = None,
    *,
    grace_period: float = DEFAULT_GRACE_PERIOD,
    kernel: Kernel | None = None,
    services: Literal["all", "runs"] = "all",
    **load_options: Any,
) -> AsyncIterator[Kernel]:
    """Load a kernel (or take ``kernel``) and run its services for the duration of the block
    (``services="runs"``: only those with ``needed_by_runs``, for a one-off run).

    Every service is started with ``await nursery.start(service.serve)``, so the block begins
    once all are ready. On exit ``kernel.stopping`` is set, services get ``grace_period`` seconds
    to finish on their own (each should take well under a second), plus the largest
    ``drain_seconds`` a started service declares (see :class:`Service`), and whatever still runs
    is then cancelled, with a warning on the ``soulacy.kernel`` logger naming it.
    """
    kernel = kernel or Kernel.load(workspace, **load_options)
    if kernel.is_open:
        raise UsageError("the kernel is open already (one open_kernel block at a time)")
    grace: list[float] = []  # when the grace period ends, once the kernel is stopping
    running: list[Service] = []
    stopped = _Stopped()
    try:
        async with trio.open_nursery() as nursery:
            kernel._nursery = nursery  # background work (start_soon) shares it
            try:
                for service in kernel.services():
                    if services == "runs" and not getattr(service, "needed_by_runs", False):
                        continue
                    started = await nursery.start(_serve, service, grace, stopped)
                    kernel.started[service.name] = started
                    running.append(service)
                    log.info("service %r started", service.name)
                yield kernel
            finally:
                kernel.stopping.set()
                drain = max((_drain_seconds(s) for s in running), default=0.0)
                grace.append(trio.current_time() + grace_period + drain)
                nursery.cancel_scope.deadline = grace[0]
                # The runs a service drains still renew their leases: background work stops
                # once every service has (or at the grace period's end, with everything).
                try:
                    await stopped.all_of(len(running))
                finally:
                    kernel._stop_background()
    finally:
        kernel._stop_background()
        with trio.CancelScope(shield=True):  # after the services, which may still use them
            await kernel.aclose()


def _drain_seconds(service: Service) -> float:
    """The seconds a service says it may take to drain its work once the kernel stops."""
    seconds = getattr(service, "drain_seconds", 0.0)
    try:
        return max(0.0, float(seconds or 0.0))
    except (TypeError, ValueError):  # a plugin's mistake costs it its drain, not the stop
        return 0.0


class _Stopped:
    """Counts the services that returned, for the kernel to wait for all of them."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = trio.Event()

    def one(self) -> None:
        self.count += 1
        self.changed.set()
        self.changed = trio.Event()

    async def all_of(self, services: int) -> None:
        while self.count < services:
            await self.changed.wait()


async def _serve(
    service: Service,
    grace: list[float],
    stopped: _Stopped,
    *,
    task_status: trio.TaskStatus[Any],
) -> None:
    try:
        await service.serve(task_status=task_status)
    except trio.Cancelled:
        if grace and trio.current_time() >= grace[0]:  # cancelled by the grace period's end
            log.warning(
                "service %r did not stop when the kernel stopped: cancelled after the grace"
                " period (a service awaits kernel.stopping)",
                service.name,
            )
        raise
    finally:
        stopped.one()
        log.info("service %r stopped", service.name)
