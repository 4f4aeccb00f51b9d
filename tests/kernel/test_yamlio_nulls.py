"""The round-trip writer keeps each null as the file spelled it: ``key: null``, ``key: ~`` and
``key:`` are the same None once loaded, and none of them changes when the file is rewritten."""

from __future__ import annotations

import pytest

from soulacy.kernel.yamlio import parse_yaml
from soulacy.plugins.yamledit import dump_round_trip

SPELLINGS = """\
# nulls, every way a person writes them
a:
  b: null   # spelled out
  c:
  d: ~ # tilde
  e: Null
items:
  - null
  - ~
  - 3
flow: {x: null, y: 1, z: ~}
"""


def test_an_unchanged_document_is_written_back_byte_for_byte() -> None:
    doc = parse_yaml(SPELLINGS, "t.yaml")
    assert doc["a"] == {"b": None, "c": None, "d": None, "e": None}
    assert dump_round_trip(doc, SPELLINGS) == SPELLINGS


def test_a_change_elsewhere_leaves_every_null_line_as_it_was() -> None:
    doc = parse_yaml(SPELLINGS, "t.yaml")
    doc["flow"]["y"] = 2
    doc["a"]["new"] = None  # a None the file never had: ruamel's own empty value
    out = dump_round_trip(doc, SPELLINGS)
    assert out == SPELLINGS.replace("y: 1", "y: 2").replace("  e: Null\n", "  e: Null\n  new:\n")
    assert doc["a"]["b"] is None  # the document itself is left as it was loaded
    assert doc["items"][:2] == [None, None]


def test_a_null_that_became_a_value_is_written_as_the_value() -> None:
    doc = parse_yaml(SPELLINGS, "t.yaml")
    doc["a"]["b"] = 5
    doc["a"]["c"] = "set"
    out = dump_round_trip(doc, SPELLINGS)
    assert "  b: 5      # spelled out\n" in out  # the comment keeps its column
    assert "  c: set\n" in out
    assert "  d: ~ # tilde\n" in out


@pytest.mark.parametrize("spelling", ["null", "~", "Null", "NULL"])
def test_each_spelling_of_null_survives(spelling: str) -> None:
    text = f"x: {spelling}\ny: 1\n"
    doc = parse_yaml(text, "t.yaml")
    doc["y"] = 2
    assert dump_round_trip(doc, text) == f"x: {spelling}\ny: 2\n"
