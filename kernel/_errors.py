"""Errors the kernel raises; each renders as one clear paragraph for a person."""

from __future__ import annotations

from collections.abc import Iterable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: this module is on `soulacy --help`'s path
if TYPE_CHECKING:
    from typing import Any, ClassVar, Self


class SoulacyError(Exception):
    """Base of every error Soulacy raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code = 1


class UsageError(SoulacyError):
    """The person asked for something that cannot be done as asked (bad arguments, bad input)."""

    exit_code = 2


class PluginError(SoulacyError):
    """A plugin could not be loaded, or plugins conflict with each other."""

    exit_code = 2


class FrozenRecord:
    """A small immutable record: equal when its fields are, hashable, with a readable repr.

    What ``attrs.frozen`` gives, written out, for the few records the launcher needs before
    any command runs (``soulacy --help`` must not import attrs, decision 0038). A subclass
    names its fields in order in ``_fields`` (its ``__slots__`` too) and sets them in
    ``__init__`` with ``_set``.
    """

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _hidden: ClassVar[frozenset[str]] = frozenset()  # fields left out of the repr

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((self.__class__, self._values()))

    def __repr__(self) -> str:
        shown = (
            f"{name}={value!r}"
            for name, value in zip(self._fields, self._values(), strict=True)
            if name not in self._hidden
        )
        return f"{type(self).__name__}({', '.join(shown)})"

    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]:
        return (type(self), self._values())

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (as ``attrs.evolve``)."""
        values = dict(zip(self._fields, self._values(), strict=True))
        values.update(changes)
        return type(self)(**values)


class Location(FrozenRecord):
    """Where a configuration value came from: a file position or an environment variable."""

    _fields = ("file", "line", "column")
    __slots__ = _fields
    file: str
    line: int | None  # 1-based
    column: int | None  # 1-based

    def __init__(self, file: str, line: int | None = None, column: int | None = None) -> None:
        self._set(file=file, line=line, column=column)

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"


class ConfigIssue(FrozenRecord):
    """One problem in a configuration source, pointing at the key that has it."""

    _fields = ("location", "path", "message", "value", "has_value")
    __slots__ = _fields
    _hidden = frozenset({"value"})
    location: Location
    path: str  # dotted key path, e.g. "runtime.timeouts.run"
    message: str  # what was expected
    value: object
    has_value: bool

    def __init__(
        self,
        location: Location,
        path: str,
        message: str,
        value: object = None,
        has_value: bool = False,
    ) -> None:
        self._set(location=location, path=path, message=message, value=value, has_value=has_value)

    def __str__(self) -> str:
        # Errors are printed and logged: never a secret in them, nor a value under a secret
        # key or a mapping of secrets anywhere in the path (server.api_keys.alice: 12345).
        from ._redact import MASK, is_secret_key, masks_members, redact

        # A number or a boolean under a secret-looking name of its own is shown (bogus_key: 1,
        # issue 38): only strings (and what a mapping or list holds) are masked by the name.
        parts = self.path.split(".")
        secret = any(is_secret_key(p) or masks_members(p) for p in parts[:-1])
        plain = isinstance(self.value, bool | int | float)
        if secret:
            shown: object = MASK
        elif not self.has_value:
            shown = None
        else:
            shown = self.value if plain else redact(self.value, parts[-1])
        got = f" (got {shown!r})" if self.has_value else ""
        where = f"{self.location}: " if self.location.file else ""
        key = f"{self.path}: " if self.path else ""
        return f"{where}{key}{self.message}{got}"


class ConfigError(UsageError):
    """One or more configuration problems, reported together rather than one per run."""

    def __init__(self, issues: Iterable[ConfigIssue]) -> None:
        self.issues = list(issues)
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.issues) == 1:
            return f"invalid configuration: {self.issues[0]}"
        lines = [f"invalid configuration ({len(self.issues)} problems):"]
        lines.extend(f"  - {issue}" for issue in self.issues)
        return "\n".join(lines)


class RunIdInUse(UsageError):
    """A run id that a live run of this kernel holds: a run id names one run at a time.

    ``owner`` is the principal of the run that holds it; a transport answers 409 to that same
    principal and 404 to any other (which must not learn that the id exists).
    """

    def __init__(self, run_id: str, owner: str | None) -> None:
        self.run_id = run_id
        self.owner = owner
        super().__init__(f"run {run_id!r} is still running; wait for it or use another run id")


class RunNotContinuable(UsageError):
    """A run asked to continue that cannot: only a run stored as ended ``incomplete`` (a limit,
    a stall, a timeout) continues in place; ``status`` is what the store says of it (None: no
    such run)."""

    def __init__(self, run_id: str, status: str | None, why: str | None = None) -> None:
        self.run_id = run_id
        self.status = status
        if status is None:
            message = f"no run {run_id!r}"
        elif why is not None:
            message = f"run {run_id!r} does not continue: {why}"
        else:
            message = f"run {run_id!r} is {status}: only a run that ended incomplete continues" + (
                " (it is still running)" if status == "running" else ""
            )
        super().__init__(message)

    @classmethod
    def workflow(cls, run_id: str, status: str) -> RunNotContinuable:
        """A workflow's run: it keeps checkpoints of its steps and is bound to its input, so it
        resumes by a same-id retry with that input, not by a continuation (a steering text)."""
        why = "it is a workflow's (it keeps step checkpoints): retry it with its run id instead"
        return cls(run_id, status, why)


class CapacityError(SoulacyError):
    """Too many runs at once (``runtime.max_concurrent_sessions`` or the per-principal cap).

    Nothing was started or stored; ``retry_after`` is a suggested wait in seconds.
    """

    exit_code = 75  # EX_TEMPFAIL: try again later

    def __init__(self, scope: str, limit: int, retry_after: int = 1) -> None:
        self.scope = scope  # "overall" or "principal"
        self.limit = limit
        self.retry_after = retry_after
        which = "runs in all" if scope == "overall" else "runs of this principal"
        super().__init__(f"too many concurrent runs: at most {limit} {which}; retry later")
