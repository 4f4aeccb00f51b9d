"""What the run engine expects of the objects that per-run hooks return."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from ._errors import SoulacyError
from ._messages import Message, ToolSpec

VerdictKind = Literal["progress", "repeated", "stalled"]


@attrs.frozen
class Verdict:
    """A progress detector's judgement of one tool result.

    ``stalled`` ends the run as incomplete (reason ``no_progress``) with ``evidence``;
    ``warning``, when set, is appended to the tool result so that the model reads it.
    """

    kind: VerdictKind
    warning: str | None = None
    evidence: Mapping[str, Any] = attrs.field(factory=dict)


class ProgressDetector(Protocol):
    """Judges every tool result of one run (``soulacy_make_progress_detector``)."""

    def observe(
        self, tool: str, arguments: Mapping[str, Any], result: Any, is_error: bool
    ) -> Verdict: ...


class Compactor(Protocol):
    """Builds the message list sent to the model under an input allowance in tokens
    (``soulacy_make_compactor``); ``None`` means the allowance is unknown.

    It must not mutate ``messages`` (the run's own record). When what must be kept (system
    instructions and ``tools`` schemas) cannot fit, it raises :class:`ContextOverflow`. It may
    also define ``calibrate(view, reported_input_tokens)``, which the engine calls after each
    model call with the provider's own count of what was sent.
    """

    def compact(
        self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec] = ()
    ) -> Sequence[Message]: ...


class PassThrough:
    """The compactor used when no plugin provides one: sends the messages as they are."""

    def compact(
        self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec] = ()
    ) -> Sequence[Message]:
        return messages


class ContextOverflow(SoulacyError):
    """What must be sent (system instructions and tool schemas) exceeds the input allowance.

    Dropping the task cannot resolve that conflict, so the run fails with the sizes measured
    and the provider's actual limit, when known.
    """

    def __init__(
        self, message: str, *, required: int, allowance: int, limit: int | None = None
    ) -> None:
        super().__init__(message)
        self.required = required
        self.allowance = allowance
        self.limit = limit
