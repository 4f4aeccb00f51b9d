"""Public names of the message types: what providers, compactors and stores exchange."""

from ._messages import Message, ModelReply, ModelRequest, Role, ToolCall, ToolSpec, Usage

__all__ = ["Message", "ModelReply", "ModelRequest", "Role", "ToolCall", "ToolSpec", "Usage"]
