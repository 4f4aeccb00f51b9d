"""A2A 0.3's JSON-RPC methods, served as translations of 1.0's: 0.3 names its methods
``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``, tags
every object with ``kind``, spells states in lower case (``input-required``) and roles ``user`` /
``agent``, marks a stream's last status ``final``, and answers ``message/send`` with the task
itself. What a method does is 1.0's; only the shapes are translated, in and out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _wire as wire

VERSION = "0.3"
ACCEPTED_VERSIONS = frozenset({"0.3", "0.3.0"})
# 0.3's method -> 1.0's.
METHODS = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/resubscribe": "SubscribeToTask",
}
NOT_SERVED = {
    "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
}
ROLES = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}


def state(name: str) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``."""
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


# -- requests: 0.3 in, 1.0 out ----------------------------------------------------------------


def params(method: str, given: Any) -> Any:
    """A 0.3 request's params as 1.0's (what is not an object is left for 1.0's checks)."""
    if method not in ("message/send", "message/stream") or not isinstance(given, Mapping):
        return given
    found = dict(given)
    message = found.get("message")
    if isinstance(message, Mapping):
        found["message"] = _message_in(message)
    configuration = found.get("configuration")
    if isinstance(configuration, Mapping):
        found["configuration"] = _configuration_in(configuration)
    return found


def _message_in(message: Mapping[str, Any]) -> dict[str, Any]:
    found = {k: v for k, v in message.items() if k != "kind"}
    if isinstance(found.get("role"), str):
        found["role"] = ROLES.get(found["role"], found["role"])
    parts = found.get("parts")
    if isinstance(parts, list):
        found["parts"] = [_part_in(part) for part in parts]
    return found


def _part_in(part: Any) -> Any:
    if not isinstance(part, Mapping):
        return part
    if part.get("kind") == "text":
        return {k: v for k, v in part.items() if k != "kind"}
    if part.get("kind") in ("file", "data"):  # refused by 1.0's check, naming what it is
        return {str(part["kind"]): part.get(str(part["kind"]))}
    return part


def _configuration_in(configuration: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in configuration.items():
        if key == "blocking":
            found["returnImmediately"] = value is False if isinstance(value, bool) else value
        elif key == "pushNotificationConfig":
            found["taskPushNotificationConfig"] = value
        else:
            found[key] = value
    return found


# -- answers: 1.0 in, 0.3 out -----------------------------------------------------------------


def result(method: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """A 1.0 method's result as 0.3's: a task, or ``message/send``'s task or message."""
    if "task" in answer and method == "message/send":
        return task(answer["task"])
    if "message" in answer and method == "message/send":
        return message(answer["message"])
    return task(answer)


def event(found: Mapping[str, Any]) -> dict[str, Any]:
    """A 1.0 stream event (``{"task"|"statusUpdate"|"artifactUpdate": …}``) as 0.3's."""
    if "task" in found:
        return task(found["task"])
    if "statusUpdate" in found:
        update = found["statusUpdate"]
        shown = _status(update["status"])
        return {
            "kind": "status-update",
            "taskId": update["taskId"],
            "contextId": update["contextId"],
            "status": shown,
            "final": update["status"]["state"] in wire.TERMINAL,
            **({"metadata": update["metadata"]} if update.get("metadata") else {}),
        }
    update = found["artifactUpdate"]
    return {
        "kind": "artifact-update",
        "taskId": update["taskId"],
        "contextId": update["contextId"],
        "artifact": _artifact(update["artifact"]),
        "append": bool(update.get("append")),
        "lastChunk": bool(update.get("lastChunk")),
    }


def task(found: Mapping[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "kind": "task",
        "id": found["id"],
        "contextId": found["contextId"],
        "status": _status(found["status"]),
        "history": [message(m) for m in found.get("history") or ()],
    }
    if found.get("artifacts"):
        shown["artifacts"] = [_artifact(a) for a in found["artifacts"]]
    if found.get("metadata"):
        shown["metadata"] = found["metadata"]
    return shown


def message(found: Mapping[str, Any]) -> dict[str, Any]:
    roles = {v: k for k, v in ROLES.items()}
    shown = {k: v for k, v in found.items() if k not in ("role", "parts")}
    return {
        "kind": "message",
        **shown,
        "role": roles.get(found.get("role", ""), "agent"),
        "parts": [_part(p) for p in found.get("parts") or ()],
    }


def _status(found: Mapping[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {"state": state(found["state"])}
    if "timestamp" in found:
        shown["timestamp"] = found["timestamp"]
    if found.get("message"):
        shown["message"] = message(found["message"])
    return shown


def _artifact(found: Mapping[str, Any]) -> dict[str, Any]:
    return {**found, "parts": [_part(p) for p in found.get("parts") or ()]}


def _part(found: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": "text", "text": found.get("text", "")}


# -- the client's: 1.0's request out as 0.3's, 0.3's answer in as 1.0's -------------------------


def message_out(text: str, message_id: str, context_id: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
    }
    if context_id:
        message["contextId"] = context_id
    return message


def answer_in(found: Mapping[str, Any]) -> dict[str, Any]:
    """``message/send``'s answer (a task or a message) as 1.0's ``SendMessage`` result."""
    if found.get("kind") == "message" or ("messageId" in found and "status" not in found):
        return {"message": message_in(found)}
    return {"task": task_in(found)}


def event_in(found: Mapping[str, Any]) -> dict[str, Any]:
    """A ``message/stream`` event (a task, a message, a status or an artifact update) as 1.0's."""
    kind = found.get("kind")
    if kind == "status-update":
        return {"statusUpdate": {**found, "status": _status_in(found.get("status"))}}
    if kind == "artifact-update":
        return {"artifactUpdate": dict(found)}
    return answer_in(found)


def _status_in(status: Any) -> dict[str, Any]:
    if not isinstance(status, Mapping):
        status = {}
    found: dict[str, Any] = {
        "state": "TASK_STATE_" + str(status.get("state", "unknown")).upper().replace("-", "_")
    }
    if isinstance(status.get("message"), Mapping):
        found["message"] = message_in(status["message"])
    return found


def task_in(found: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": found.get("id"),
        "contextId": found.get("contextId"),
        "status": _status_in(found.get("status")),
        "artifacts": [a for a in found.get("artifacts") or () if isinstance(a, Mapping)],
        "history": [message_in(m) for m in found.get("history") or () if isinstance(m, Mapping)],
    }


def message_in(found: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **{k: v for k, v in found.items() if k != "kind"},
        "role": ROLES.get(str(found.get("role")), "ROLE_AGENT"),
    }
