"""The one exception the SDK raises."""

from __future__ import annotations

from typing import Any

__all__ = ["SoulacyError"]


class SoulacyError(Exception):
    """A call to the Soulacy API failed.

    ``status`` is the HTTP status of the answer, or None when no answer came (the connection was
    refused, dropped or timed out). ``body`` is the answer's body, parsed from JSON when it is
    JSON (the server's errors are ``{"error": ..., "status": ..., "fields"?: {...}}``), else its
    text; None without an answer. ``method`` and ``path`` name the request; the message names
    them too.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str,
        path: str,
        status: int | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.path = path
        self.status = status
        self.body = body

    @property
    def fields(self) -> dict[str, str]:
        """The request fields at fault, for a 422 answer (empty otherwise)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("fields"), dict):
            return {str(k): str(v) for k, v in self.body["fields"].items()}
        return {}

    def __reduce__(self) -> tuple[Any, ...]:  # keyword-only arguments: pickle them explicitly
        return (_rebuild, (self.message, self.method, self.path, self.status, self.body))


def _rebuild(message: str, method: str, path: str, status: int | None, body: Any) -> SoulacyError:
    return SoulacyError(message, method=method, path=path, status=status, body=body)
