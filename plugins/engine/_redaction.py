"""A tool call's arguments as the history, the proof and the effect ledger keep them: redacted
(``redact_arguments``), worked out once per call of a run.

A call's arguments are asked about up to three times: by its reservation (are they kept
masked?), by the storing of the reply that asked for it, and by the storing of its tool record
(the proof's receipt). The run keeps the answer by call id (its ``Redactions``) until the
record is stored, its last use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from soulacy.kernel import redact_arguments
from soulacy.kernel.messages import Message
from soulacy.kernel.store import ToolRecord

# By call id: the arguments redacted, and what is stored for them (None: nothing in them is
# secret, they are stored as they are).
Redactions = dict[str, tuple[Mapping[str, Any], dict[str, Any] | None]]


def redacted(
    known: Redactions, call_id: str, arguments: Mapping[str, Any]
) -> dict[str, Any] | None:
    """``redact_arguments(arguments)``, or None when nothing in them is secret; worked out once
    for ``call_id`` while its arguments stay equal."""
    seen = known.get(call_id)
    if seen is None or seen[0] != arguments:
        shown = redact_arguments(arguments)
        seen = known[call_id] = (arguments, None if shown == arguments else shown)
    return seen[1]


def redacted_calls(known: Redactions, message: Message) -> Message:
    """``message`` with its tool calls' arguments redacted (the same object when none is)."""
    calls = message.tool_calls
    shown = [redacted(known, call.id, call.arguments) for call in calls]
    if shown.count(None) == len(shown):  # nothing secret: the usual case
        return message
    return attrs.evolve(
        message,
        tool_calls=tuple(
            call if s is None else attrs.evolve(call, arguments=s)
            for call, s in zip(calls, shown, strict=True)
        ),
    )


def redacted_record(known: Redactions, record: ToolRecord) -> ToolRecord:
    """``record`` with its call's arguments redacted (the same object when none is); the call's
    entry in ``known`` is dropped: its record is the last of it to be stored."""
    shown = redacted(known, record.call_id, record.arguments)
    known.pop(record.call_id, None)
    return record if shown is None else attrs.evolve(record, arguments=shown)
