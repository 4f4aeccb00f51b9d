"""A strict cattrs converter: configuration never guesses what a person meant.

Default cattrs turns ``"false"`` into True, ``3.9`` into 3, ``None`` into ``"None"`` and a string
into a list of characters, and ignores unknown keys. Every one of those hides a typo in a file that
runs for days, so here each of them is an error that says what was expected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import cattrs
from cattrs.cols import is_sequence, list_structure_factory
from cattrs.gen import make_dict_structure_fn

from ._durations import Duration

MAX_INT = 2**53
"""The largest integer (and magnitude of a number) a configuration value may have.

2**53 is the largest integer that JSON readers such as a browser keep exactly (the portal shows
and saves these values), and far beyond any real count of turns, tokens, bytes or dollars; a
larger value is a typo, and accepting it would only move the error somewhere less clear."""


class ConfigValueError(ValueError):
    """A value of the wrong shape; the message says what was expected (shown to the person)."""


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigValueError(f"expected an integer, got {_type_name(value)}")
    if not -MAX_INT <= value <= MAX_INT:
        raise ConfigValueError(f"expected an integer from {-MAX_INT} to {MAX_INT} (2**53)")
    return int(value)


def _strict_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigValueError(f"expected a number, got {_type_name(value)}")
    if not -MAX_INT <= value <= MAX_INT:  # also false for NaN
        raise ConfigValueError(f"expected a finite number from {-MAX_INT} to {MAX_INT} (2**53)")
    return float(value)


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise ConfigValueError(f"expected true or false, got {_type_name(value)}")
    return value


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise ConfigValueError(f"expected a string, got {_type_name(value)}")
    return str(value)  # drop ruamel's scalar subclasses


def _duration(value: Any, _: type) -> Duration:
    if isinstance(value, Duration):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigValueError(f"expected a duration string, got {_type_name(value)}")
    try:
        return Duration.parse(value)
    except ValueError as exc:
        raise ConfigValueError(str(exc)) from None


def _strict_sequence(t: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    inner = list_structure_factory(t, conv)

    def structure(value: Any, type_: Any) -> Any:
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise ConfigValueError(f"expected a list, got {_type_name(value)}")
        return inner(value, type_)

    return structure


def _strict_attrs(t: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    inner = make_dict_structure_fn(t, conv)

    def structure(value: Any, type_: Any) -> Any:
        if value is None:  # a key left empty in YAML (``timeouts:``) means "all defaults"
            try:
                return type_()
            except TypeError:
                pass
        if not isinstance(value, Mapping):
            raise ConfigValueError(f"expected a mapping of keys, got {_type_name(value)}")
        return inner(value, type_)

    return structure


def _strict_dict(t: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    inner = conv.gen_structure_mapping(t)

    def structure(value: Any, type_: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ConfigValueError(f"expected a mapping, got {_type_name(value)}")
        return inner(value, type_)

    return structure


def _is_dict(t: Any) -> bool:
    origin = getattr(t, "__origin__", None)
    return origin in (dict, Mapping) or t is dict


def make_converter() -> cattrs.Converter:
    """A converter with ``forbid_extra_keys`` and detailed validation, strict about every type."""
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(Duration, _duration)
    conv.register_unstructure_hook(Duration, str)
    conv.register_structure_hook_factory(is_sequence, _strict_sequence)
    conv.register_structure_hook_factory(_is_dict, _strict_dict)
    conv.register_structure_hook_factory(attrs.has, _strict_attrs)
    return conv


converter = make_converter()
