"""Hook-level testing without pytest: :class:`HookRecorder` (every hook call of plugin
managers, as :class:`HookCall` records) and :func:`throwaway_plugin`."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["HookCall", "HookRecorder", "throwaway_plugin"]


@attrs.define
class HookCall:
    """One recorded hook call: its name, keyword arguments, the plugins implementing it (in
    call order) and, once finished, its result."""

    name: str
    kwargs: dict[str, Any]
    result: Any = None
    exception: BaseException | None = None
    plugins: tuple[str, ...] = ()

    def __getattr__(self, key: str) -> Any:  # call.agent_id reads the keyword argument
        try:
            return self.kwargs[key]
        except KeyError:
            raise AttributeError(key) from None


class HookRecorder:
    """Records every hook call of plugin managers, built on ``add_hookcall_monitoring``.

    ``HookRecorder(pm)`` records one manager from now on; :meth:`attach` adds another (the
    ``make_kernel`` fixture attaches each kernel it builds to the ``hook_recorder`` fixture).
    """

    def __init__(self, pm: Any = None) -> None:
        self.calls: list[HookCall] = []
        self._open: list[HookCall] = []
        self._undo: list[Callable[[], None]] = []
        self._finished = False
        if pm is not None:
            self.attach(pm)

    def attach(self, pm: Any) -> None:
        """Record the hook calls of ``pm`` too, until :meth:`finish` (after it, nothing)."""
        if not self._finished:
            self._undo.append(pm.add_hookcall_monitoring(self._before, self._after))

    def _before(self, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        # pluggy calls the last registered (and tryfirst) implementation first
        plugins = tuple(impl.plugin_name for impl in reversed(hook_impls))
        call = HookCall(hook_name, dict(kwargs), plugins=plugins)
        self.calls.append(call)
        self._open.append(call)

    def _after(
        self, outcome: Any, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        call = self._open.pop()
        call.exception = outcome.exception
        if outcome.exception is None:
            call.result = outcome.get_result()

    def getcalls(self, name: str) -> list[HookCall]:
        return [call for call in self.calls if call.name == name]

    def assert_called(self, name: str, **kwargs: Any) -> HookCall:
        """The last call of hook ``name`` whose arguments include ``kwargs``; fails if none."""
        for call in reversed(self.getcalls(name)):
            if all(call.kwargs.get(k) == v for k, v in kwargs.items()):
                return call
        seen = [c.kwargs for c in self.getcalls(name)]
        raise AssertionError(f"hook {name} was not called with {kwargs!r}; calls: {seen!r}")

    def finish(self) -> None:
        """Stop recording: the calls recorded so far stay in :attr:`calls`."""
        self._finished = True
        while self._undo:
            self._undo.pop()()


def throwaway_plugin(name: str = "throwaway", **hooks: Callable[..., Any]) -> Any:
    """A plugin object whose hook implementations are the given ``soulacy_*`` functions."""
    unknown = [key for key in hooks if not key.startswith("soulacy_")]
    if unknown:
        raise TypeError(f"hook implementations must be named soulacy_*: {unknown}")
    return _Throwaway(name, hooks)


class _Throwaway:
    """A throwaway plugin: its hooks as attributes (hashable, as plugin objects must be)."""

    def __init__(self, name: str, hooks: dict[str, Callable[..., Any]]) -> None:
        self.name = name
        self.__dict__.update(hooks)

    def __repr__(self) -> str:
        return f"<throwaway plugin {self.name!r}>"


def participant_plugin(name: str = "participant", **methods: Callable[..., Any]) -> Any:
    """A plugin that takes part in every run with one participant whose methods are the given
    functions (``before_tool_call=lambda run, call: ...``; see ``RunParticipant``)."""
    from soulacy.kernel.contracts import RunParticipant

    known = set(vars(RunParticipant)) - set(vars(object))
    unknown = [key for key in methods if key not in known or key.startswith("_")]
    if unknown:
        raise TypeError(f"not methods of a RunParticipant: {unknown}")
    participant = types.SimpleNamespace(**methods)  # not a plugin: need not be hashable
    return throwaway_plugin(name, soulacy_run_participants=lambda: [participant])
