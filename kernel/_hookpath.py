"""Hooks the engine calls on every turn, without pluggy's per-call machinery when it adds none.

A pluggy call checks its arguments against the spec, copies the implementation list and runs
the general ``_multicall`` loop; with several calls a turn that is a measurable share of a turn,
and most of them find no implementation at all. A :class:`HotHook` calls the same implementations
in the same order (pluggy's: last registered first, ``tryfirst``/``trylast`` respected) with the
same results (``None`` left out; the first non-``None`` answer for ``firstresult`` hooks), and
hands the call to pluggy whenever pluggy would do more: a wrapper implementation, or tracing
(``SOULACY_TRACE_PLUGINS``, which replaces the manager's inner call). The implementation list is
compared with the one it was built from on every call, so registering or unregistering a plugin
at any time is seen at the next call (docs/decisions/0042-hot-hooks-and-events-nobody-reads.md).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

import pluggy
from pluggy._callers import _multicall  # the inner call pluggy uses when nothing traces

# An implementation and how its arguments are taken from the call's keywords: ``itemgetter``
# (C) instead of a comprehension per call; ``spread`` when it takes more than one.
Call = tuple[Callable[..., Any], Callable[[dict[str, Any]], Any] | None, bool]


def _call_of(impl: Any) -> Call:
    names = tuple(impl.argnames)
    if not names:
        return impl.function, None, False
    return impl.function, itemgetter(*names), len(names) > 1


class HotHook:
    """One hook of a plugin manager, called as ``hook(kernel=..., run=...)`` is."""

    __slots__ = ("_caller", "_calls", "_current_impls", "_direct", "_firstresult", "_impls", "_pm")

    def __init__(self, pm: pluggy.PluginManager, name: str) -> None:
        self._pm = pm
        self._caller: pluggy.HookCaller = getattr(pm.hook, name)
        # pluggy's own list, mutated in place as plugins come and go (read on every call)
        self._current_impls: list[Any] = self._caller._hookimpls
        spec = self._caller.spec
        self._firstresult = bool(spec and spec.opts.get("firstresult"))
        self._impls: list[Any] | None = None  # the implementation list the calls were made from
        self._calls: list[Call] = []
        self._direct = False

    def _current(self) -> list[Any]:
        return self._current_impls

    def _refresh(self) -> None:
        impls = self._current()
        self._impls = list(impls)
        self._calls = [_call_of(impl) for impl in reversed(impls)]
        self._direct = not any(impl.wrapper or impl.hookwrapper for impl in impls)

    @property
    def implemented(self) -> bool:
        """Whether any plugin implements the hook now."""
        return bool(self._current())

    @property
    def heard(self) -> bool:
        """Whether a call now reaches anyone: an implementation, or whoever traces or records
        the manager's hook calls (``HookRecorder``, ``SOULACY_TRACE_PLUGINS``), who sees every
        call, even one that no plugin implements."""
        return bool(self._current_impls) or self._pm._inner_hookexec is not _multicall

    def __call__(self, **kwargs: Any) -> Any:
        if self._impls != self._current_impls:
            self._refresh()
        if not (self._direct and self._pm._inner_hookexec is _multicall):
            return self._caller(**kwargs)
        first, results = self._firstresult, []
        for function, take, spread in self._calls:
            if take is None:
                answer = function()
            else:
                answer = function(*take(kwargs)) if spread else function(take(kwargs))
            if answer is not None:
                if first:
                    return answer
                results.append(answer)
        return None if first else results


class HotHooks:
    """The per-turn hooks of one kernel, made on first use."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._pm = pm
        self._hooks: dict[str, HotHook] = {}

    def __getattr__(self, name: str) -> HotHook:
        if not name.startswith("soulacy_"):
            raise AttributeError(name)
        hook = self._hooks[name] = HotHook(self._pm, name)
        setattr(self, name, hook)  # found as an attribute from now on, not through here
        return hook
