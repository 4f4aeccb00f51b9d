"""Errors the kernel raises; each renders as one clear paragraph for a person."""

from __future__ import annotations

from collections.abc import Iterable

import attrs


class SoulacyError(Exception):
    """Base of every error Soulacy raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code = 1


class UsageError(SoulacyError):
    """The person asked for something that cannot be done as asked (bad arguments, bad input)."""

    exit_code = 2


class PluginError(SoulacyError):
    """A plugin could not be loaded, or plugins conflict with each other."""

    exit_code = 2


@attrs.frozen
class Location:
    """Where a configuration value came from: a file position or an environment variable."""

    file: str
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"


@attrs.frozen
class ConfigIssue:
    """One problem in a configuration source, pointing at the key that has it."""

    location: Location
    path: str  # dotted key path, e.g. "runtime.timeouts.run"
    message: str  # what was expected
    value: object = attrs.field(default=None, repr=False)
    has_value: bool = False

    def __str__(self) -> str:
        got = f" (got {self.value!r})" if self.has_value else ""
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
