"""The A2A 1.0 JSON-RPC binding's shapes, as plain JSON (protobuf's JSON mapping: camelCase keys,
enum names as strings): what the server answers and what the client sends.

No A2A SDK is imported: the wire format is JSON, so serving it needs only the HTTP plugin's
routes, and the SDK (protobuf, pydantic, gRPC stubs) stays a test dependency (decision 0070).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

PROTOCOL_VERSION = "1.0"
BINDING = "JSONRPC"
VERSION_HEADER = "a2a-version"
# The versions a request may name in its A2A-Version header (none: the client's default, 1.0).
ACCEPTED_VERSIONS = frozenset({"1.0", "1"})

# TaskState, by name (protobuf's JSON mapping of the enum).
SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, "TASK_STATE_REJECTED"})
# Every TaskState by its number (protobuf's JSON mapping reads a number as well as a name).
STATES = (
    "TASK_STATE_UNSPECIFIED",
    SUBMITTED,
    WORKING,
    COMPLETED,
    FAILED,
    CANCELED,
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
)

# A run's status (RunResult.status, RunRecord.status) as a task's state: only a completed run
# completed its task; a run stopped by a limit, an error or a crash failed it.
STATE_OF_STATUS = {
    "running": WORKING,
    "completed": COMPLETED,
    "cancelled": CANCELED,
    "incomplete": FAILED,
    "failed": FAILED,
    "interrupted": FAILED,
}

# JSON-RPC 2.0's codes and A2A's (the a2a-sdk maps these codes back to its error types).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
VERSION_NOT_SUPPORTED = -32009

# A task's and a context's ids are a run's and a conversation's: the HTTP API's id alphabet.
ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")


class RpcError(Exception):
    """A JSON-RPC error to answer: ``code``, a message naming the field, optional ``data``."""

    def __init__(self, code: int, message: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = dict(self.data)
        return error


def invalid_params(field: str, expected: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"invalid params: {field}: {expected}", {"field": field})


def response(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.body()}


def timestamp(seconds: float | None = None) -> str:
    """RFC 3339 in UTC with milliseconds (protobuf's JSON form of a Timestamp)."""
    moment = datetime.fromtimestamp(time.time() if seconds is None else seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def text_message(
    role: str, text: str, message_id: str, context_id: str, task_id: str | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": message_id,
        "contextId": context_id,
        "role": role,
        "parts": [{"text": text}],
    }
    if task_id is not None:
        message["taskId"] = task_id
    return message


def text_of_message(message: Any, field: str = "message") -> str:
    """The text of a message's parts (each a text part), or an RpcError naming the field."""
    if not isinstance(message, Mapping):
        raise invalid_params(field, "expected a Message object")
    parts = message.get("parts")
    if not isinstance(parts, Sequence) or isinstance(parts, str) or not parts:
        raise invalid_params(f"{field}.parts", "expected a non-empty list of parts")
    texts = []
    for index, part in enumerate(parts):
        if not isinstance(part, Mapping):
            raise invalid_params(f"{field}.parts[{index}]", "expected a Part object")
        text = part.get("text")
        if not isinstance(text, str):
            kinds = ", ".join(sorted(k for k in part if k not in ("metadata", "mediaType")))
            raise RpcError(
                CONTENT_TYPE_NOT_SUPPORTED,
                f"{field}.parts[{index}]: only text parts are accepted, not {kinds or 'this part'}",
                {"field": f"{field}.parts[{index}]"},
            )
        texts.append(text)
    text = "\n".join(texts)
    if not text.strip():
        raise invalid_params(f"{field}.parts", "expected some text")
    return text


def optional_id(params: Mapping[str, Any], key: str, field: str) -> str | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not ID.fullmatch(value):
        raise invalid_params(field, "expected 1-200 letters, digits and ._:@-")
    return value


def required_id(params: Mapping[str, Any], key: str = "id") -> str:
    found = optional_id(params, key, key)
    if found is None:
        raise invalid_params(key, "expected the task's id")
    return found


def history_length(params: Mapping[str, Any], field: str = "historyLength") -> int | None:
    value = params.get(field.rpartition(".")[2])
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_params(field, "expected a whole number, 0 or more")
    return value


def task_state(params: Mapping[str, Any], field: str) -> str | None:
    """A TaskState named by ``field`` (its name, or its number), or None when not given (or
    ``TASK_STATE_UNSPECIFIED``, protobuf's zero)."""
    value = params.get(field)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(STATES):
        value = STATES[value]
    if value is None or value == "" or value == STATES[0]:
        return None
    if value not in STATES:
        raise invalid_params(field, f"expected a TaskState: {', '.join(STATES[1:])}")
    return str(value)


def seconds_of(params: Mapping[str, Any], field: str) -> float | None:
    """An RFC 3339 timestamp (protobuf's JSON form) as seconds since the epoch, or None."""
    value = params.get(field)
    if value is None or value == "":
        return None
    if isinstance(value, str):
        # Protobuf writes 0, 3, 6 or 9 digits of a second; Python reads 6 at most.
        value = re.sub(r"(\.[0-9]{6})[0-9]+", r"\1", value.strip())
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None:
            return moment.timestamp()
    raise invalid_params(field, "expected an RFC 3339 timestamp with its offset, such as Z")


def optional_bool(params: Mapping[str, Any], field: str) -> bool:
    value = params.get(field, False)
    if not isinstance(value, bool):
        raise invalid_params(field, "expected a boolean")
    return value
