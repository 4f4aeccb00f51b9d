"""JSON encoders made once, for text encoded on every turn or event.

``json.dumps`` with options builds a ``JSONEncoder`` per call, and ``JSONEncoder.encode`` builds
CPython's C encoder anew per call too; on a turn's small values that costs more than the
encoding. :func:`json_encoder` builds both once and answers with the same text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)  # None: no C accelerator


def json_encoder(
    *,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """``lambda value: json.dumps(value, sort_keys=..., ensure_ascii=..., separators=...,
    default=...)``: the same text and the same errors, without an encoder built per call.

    The C encoder is built without a circular-reference check (its table of the containers
    being encoded would outlive an encoding that fails); a circular value recurses until
    ``RecursionError`` and is then encoded again by ``json``'s own encoder, which raises what
    ``json.dumps`` raises.
    """
    item_separator, key_separator = separators
    made = json.JSONEncoder(
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        separators=separators,
        default=default,
    )
    slow = made.encode
    if _C_MAKE_ENCODER is None:
        return slow
    fast = _C_MAKE_ENCODER(
        None,  # markers: no circular check (above)
        made.default,  # the given one, else what raises TypeError
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring,
        None,  # indent
        key_separator,
        item_separator,
        sort_keys,
        False,  # skipkeys
        True,  # allow_nan
    )

    def encode(value: Any) -> str:
        try:
            return "".join(fast(value, 0))
        except RecursionError:
            return slow(value)

    return encode
