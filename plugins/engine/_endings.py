"""Tool results for the calls a run leaves unanswered: model APIs refuse a conversation in
which an assistant's tool call has no result before the next other message
(docs/running.md#tool-calls-by-id)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from soulacy.kernel.messages import Message, ToolCall

if TYPE_CHECKING:
    from ._run import EngineRun as Run


# The tool results of the calls a run leaves unanswered (docs/running.md#tool-calls-by-id).
CUT_CALL = "cancelled: the run ended ({}) while this tool call was running; its effect is unknown"
UNSTARTED_CALL = "not run: the run ended ({}) before this tool call started"
UNANSWERED_CALL = (
    "interrupted: the run ended before this tool call's result was stored; its effect is unknown"
)


def answer_cut(run: Run) -> None:
    """Answer each tool call the run ends without a result (it was cancelled, timed out, lost
    its lease or failed while a tool ran, or before the reply's later calls started): a model
    API refuses a conversation with an unanswered call, so every later run of it would fail.

    The answer is a message only, no tool record: the call has no result to replay or to
    prove, so a retry of the run id runs it again, as after a crash. Only answers that go
    after what is stored are added (the store appends); an older gap is the load's to answer.
    """
    result = run.result
    reason = result.incomplete_reason or result.status
    begun = run.begun

    def say(call: ToolCall) -> str:
        return (CUT_CALL if call.id in begun else UNSTARTED_CALL).format(reason)

    messages, recorded = run.messages, run.recorded
    for index, answer in reversed(answers_to_unanswered_calls(messages, say, run.first_new)):
        if index >= recorded:
            messages.insert(index, answer)


def answer_loaded(run: Run, keep: Collection[str] = ()) -> None:
    """Answer the tool calls the loaded history leaves unanswered (stored by an earlier
    version, or by a process killed while its call waited for approval), in what the model is
    sent. Answers at the end of the history are stored with the run's first turn, which makes
    the history whole once; one inside it can only be sent (the store appends), at every load.
    """
    messages = run.messages
    answers = answers_to_unanswered_calls(messages, lambda call: UNANSWERED_CALL)
    if keep:  # calls the effect ledger settles (_ledger.settle): answered by it
        answers = [(i, answer) for i, answer in answers if answer.tool_call_id not in keep]
    if not answers:
        return
    loaded = len(messages)
    for index, answer in reversed(answers):
        messages.insert(index, answer)
    run.recorded = loaded + sum(1 for index, _ in answers if index < loaded)
    run.first_new = len(messages)


def answers_to_unanswered_calls(
    messages: Sequence[Message], say: Callable[[ToolCall], str], start: int = 0
) -> list[tuple[int, Message]]:
    """Tool results for the tool calls in ``messages[start:]`` that have none, as ``(index,
    message)`` pairs: each goes before ``messages[index]`` (``len(messages)``: at the end),
    after the other results of its call's reply, in call order. Each is an error whose content
    ``say(call)`` gives.

    Model APIs refuse a conversation in which an assistant's tool call is not answered by a
    tool result before the next other message (a run that ended while a tool ran left one).
    """
    answers: list[tuple[int, Message]] = []
    waiting: list[ToolCall] = []  # the calls of the last reply not answered yet
    for index in range(start, len(messages)):
        message = messages[index]
        if message.role == "tool":
            for n, call in enumerate(waiting):
                if call.id == message.tool_call_id:
                    del waiting[n]
                    break
            continue
        if waiting:
            answers += [(index, _answer(call, say)) for call in waiting]
            waiting = []
        if message.tool_calls:
            waiting = list(message.tool_calls)
    answers += [(len(messages), _answer(call, say)) for call in waiting]
    return answers


def _answer(call: ToolCall, say: Callable[[ToolCall], str]) -> Message:
    return Message("tool", say(call), tool_call_id=call.id, name=call.name, is_error=True)
