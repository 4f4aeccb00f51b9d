"""Tools: Python callables with JSON-schema parameters, validated before every call."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ._messages import ToolSpec

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


Effects = Literal["read", "idempotent", "unsafe"]
EFFECTS: tuple[Effects, ...] = ("read", "idempotent", "unsafe")


@attrs.frozen
class ToolCallContext:
    """The call a tool function is running for (:func:`current_tool_call`). ``idempotency_key``
    is the same for every execution of this call, in any attempt of the run and on any
    process: a tool that calls a service passes it on (an ``Idempotency-Key`` header, say) so
    that a call run again after a crash has its effect once."""

    run_id: str
    call_id: str
    tool: str

    @property
    def idempotency_key(self) -> str:
        return f"soulacy:{self.run_id}:{self.call_id}"


_CURRENT_CALL: contextvars.ContextVar[ToolCallContext | None] = contextvars.ContextVar(
    "soulacy_tool_call", default=None
)


def current_tool_call() -> ToolCallContext | None:
    """The call the running tool function serves, or None outside a tool call (a sync tool in
    its worker thread sees it too)."""
    return _CURRENT_CALL.get()


@contextlib.contextmanager
def in_tool_call(context: ToolCallContext) -> Iterator[None]:
    """Make ``context`` the current call while a tool function runs (a runner's part)."""
    token = _CURRENT_CALL.set(context)
    try:
        yield
    finally:
        _CURRENT_CALL.reset(token)


@attrs.frozen
class Tool:
    """A callable the model may call. ``function`` takes the arguments as keywords and may be
    ``async``; what it returns is the tool's result (text, or data rendered as JSON).

    ``normalize`` optionally maps a result to what counts for progress detection (a tool whose
    results carry a timestamp can strip it). ``listed_as`` is the SOUL.yaml ``tools:`` entry
    that selects the tool when that is not its name (the ``file_tools`` plugin's
    ``file.py:function``). ``chosen``: the plugin offers it because other keys of the agent's
    SOUL.yaml chose it (the ``mcp`` plugin's ``mcp_servers``), without a ``tools:`` entry.

    ``effects`` says what running a call again does: ``read`` (nothing: it changes nothing),
    ``idempotent`` (nothing more, given the call's :attr:`ToolCallContext.idempotency_key`) or
    ``unsafe`` (it may act twice), the default. A call of an ``unsafe`` tool that a crash cut
    while it ran is never run again without a person's decision (docs/running.md, the effect
    ledger); an agent's SOUL.yaml ``tool_effects`` may say otherwise per tool.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    function: Callable[..., Any]
    normalize: Callable[[Any], Any] | None = None
    listed_as: str | None = None
    chosen: bool = False
    effects: Effects = attrs.field(default="unsafe", validator=attrs.validators.in_(EFFECTS))

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        *,
        effects: Effects = "unsafe",
    ) -> Tool:
        """Derive the schema from the signature's type hints and the description from the
        docstring's first paragraph."""
        doc = inspect.getdoc(function) or ""
        return cls(
            name=name or function.__name__,
            description=description or doc.split("\n\n")[0].replace("\n", " "),
            parameters=schema_of(function),
            function=function,
            effects=effects,
        )

    # Asked before every call: worked out once, when the tool is made (or evolved).
    _is_async: bool = attrs.field(init=False, repr=False, eq=False)
    _check_arguments: Callable[[Any], list[str]] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        is_async = inspect.iscoroutinefunction(self.function) or inspect.iscoroutinefunction(
            getattr(self.function, "__call__", None)  # noqa: B004 - async callable objects
        )
        object.__setattr__(self, "_is_async", is_async)
        object.__setattr__(self, "_check_arguments", arguments_checker(self.parameters))

    @property
    def is_async(self) -> bool:
        """``async def`` tools run on the Trio thread; plain functions in a worker thread."""
        return self._is_async

    def check_arguments(self, arguments: Any) -> list[str]:
        """Problems of ``arguments`` against :attr:`parameters` (empty if none): what
        :func:`validate_arguments` says, with the common valid case answered without walking
        the schema. The schema is read when the tool is made (``parameters`` is not copied:
        changing it in place afterwards is not seen)."""
        return self._check_arguments(arguments)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


def _json_type(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _json_type(options[0]) if len(options) == 1 else {}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(hint))}
    if origin in (list, Sequence, tuple):
        args = typing.get_args(hint)
        return {"type": "array", **({"items": _json_type(args[0])} if args else {})}
    if origin in (dict, Mapping):
        return {"type": "object"}
    return {"type": _JSON_TYPES[hint]} if hint in _JSON_TYPES else {}


def schema_of(function: Callable[..., Any]) -> dict[str, Any]:
    """A JSON schema of ``function``'s keyword parameters."""
    hints = typing.get_type_hints(function)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[param.name] = _json_type(hints.get(param.name, Any))
        if param.default is param.empty:
            required.append(param.name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


# Keys of a property's schema that constrain nothing the check looks at.
_NOTES = frozenset({"type", "description", "title", "default", "examples"})


def arguments_checker(schema: object) -> Callable[[Any], list[str]]:
    """:func:`validate_arguments` for one schema. An object schema whose properties only name
    a JSON type (the shape :func:`schema_of` makes) gets a quick check of the valid case; any
    argument it does not pass, and any other schema, gets the full walk (and its messages)."""

    if not isinstance(schema, Mapping):  # not a schema: the call's check says what is wrong
        return lambda arguments: _check(schema, arguments, "arguments")  # type: ignore[arg-type]

    def full(arguments: Any) -> list[str]:
        return _check(schema, arguments, "arguments")

    properties = schema.get("properties", {})
    types_of: dict[str, str] = {}
    simple = schema.get("type") == "object" and "enum" not in schema
    if simple and isinstance(properties, Mapping):
        for key, item in properties.items():
            kind = item.get("type") if isinstance(item, Mapping) else None
            if not isinstance(kind, str) or not _NOTES.issuperset(item):
                simple = False
                break
            types_of[key] = kind
    if not simple:
        return full
    required = frozenset(schema.get("required", ()))
    closed = schema.get("additionalProperties") is False

    def check(arguments: Any) -> list[str]:
        if type(arguments) is dict and required <= arguments.keys():
            for key, value in arguments.items():
                kind = types_of.get(key)
                if kind is None:
                    if closed:
                        return full(arguments)
                elif not _is_type(value, kind):
                    return full(arguments)
            return []
        return full(arguments)

    return check


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> list[str]:
    """Problems of ``arguments`` against the subset of JSON schema tools use (empty if none)."""
    return _check(schema, arguments, "arguments")


def _check(schema: Mapping[str, Any], value: Any, where: str) -> list[str]:
    problems: list[str] = []
    expected = schema.get("type")
    if expected and not _is_type(value, expected):
        return [f"{where}: expected {expected}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: expected one of {list(schema['enum'])!r}, got {value!r}"]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                problems.append(f"{where}.{key}: required")
        for key, item in value.items():
            if key in props:
                problems.extend(_check(props[key], item, f"{where}.{key}"))
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}.{key}: unexpected argument")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problems.extend(_check(schema["items"], item, f"{where}[{index}]"))
    return problems


def _is_type(value: Any, expected: str) -> bool:
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _PYTHON_TYPES.get(expected, object))


_PYTHON_TYPES = {"string": str, "boolean": bool, "array": list, "object": dict, "null": type(None)}


def file_functions(folder: Path) -> list[str]:
    """``file.py:function`` for every public top-level function of the ``.py`` files directly
    in ``folder``, read without importing them (what a misspelt entry may have meant)."""
    import ast

    names: list[str] = []
    for path in sorted(folder.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        names.extend(
            f"{path.name}:{node.name}"
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and not node.name.startswith("_")
        )
    return names
