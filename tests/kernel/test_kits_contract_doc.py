"""docs/storage.md's store contract follows the code: the protocols' methods with their exact
signatures and docstrings, and the record types with their fields, are generated from
soulacy.kernel.store; a test regenerates them and compares.

    python tests/kernel/test_kits_contract_doc.py      # rewrites the generated part
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

import attrs

from soulacy.kernel import store

DOC = Path(__file__).resolve().parents[2] / "docs" / "storage.md"
BEGIN = "<!-- BEGIN GENERATED store contract: python tests/kernel/test_kits_contract_doc.py -->"
END = "<!-- END GENERATED store contract -->"
# The one store protocol (the object ``soulacy_store`` returns), then the roles it plays.
PROTOCOLS = (
    ("Store", "the object `soulacy_store` returns"),
    ("ConversationStore", "a role of `Store`"),
    ("ProofStore", "a role of `Store`"),
    ("CheckpointStore", "a role of `Store`"),
    ("LeaseStore", "a role of `Store`"),
    ("CounterStore", "a role of `Store`"),
    ("RunEventStore", "a role of `Store`"),
    ("ApprovalStore", "a role of `Store`"),
    ("RetentionStore", "optional: a store that prunes, for the `retention` plugin"),
)
RECORDS = (
    "RunRecord",
    "HistoryEntry",
    "ToolRecord",
    "StateRow",
    "Ending",
    "ProofRecord",
    "Checkpoint",
    "LeaseOwner",
    "Lease",
    "LeaseGrant",
    "CancelRequest",
    "RunEvent",
    "RunEventBatch",
    "RunEvents",
    "ApprovalRequest",
    "ApprovalDecision",
    "ConversationKey",
    "RetentionLimits",
    "Pruned",
)


def _param(p: inspect.Parameter) -> str:
    text = f"{p.name}: {p.annotation}" if p.annotation is not p.empty else p.name
    if p.default is not p.empty:
        default = "EVERY_PRINCIPAL" if p.default is store.EVERY_PRINCIPAL else repr(p.default)
        text += f" = {default}"
    return text


def _signature(name: str, fn: Any) -> str:
    sig = inspect.signature(fn)
    params: list[str] = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        if p.kind is p.KEYWORD_ONLY and "*" not in params:
            params.append("*")  # the keyword-only parameters follow
        params.append(_param(p))
    prefix = "async def" if inspect.iscoroutinefunction(fn) else "def"
    one_line = f"{prefix} {name}({', '.join(params)}) -> {sig.return_annotation}"
    if len(one_line) <= 96:
        return one_line
    body = "".join(f"    {p},\n" for p in params)
    return f"{prefix} {name}(\n{body}) -> {sig.return_annotation}"


def _default(field: Any) -> str:
    if field.default is attrs.NOTHING:
        return "required"
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        factory = field.default.factory
        return f"`{factory.__module__}.{factory.__qualname__}()`".replace("builtins.", "")
    return f"`{field.default!r}`"


def _markdown(text: str) -> str:
    text = re.sub(r":(?:class|meth|func|attr):`~?([^`]+)`", r"`\1`", text)  # reST roles
    return text.replace("``", "`")  # docstrings are reStructuredText


def _first_line(doc: str | None) -> str:
    return " ".join((doc or "").split("\n\n")[0].split())


def render() -> str:
    out = [BEGIN, "", "### Protocols", ""]
    for name, role in PROTOCOLS:
        cls = getattr(store, name)
        doc = _markdown(" ".join((inspect.getdoc(cls) or "").split()))
        out += [f"#### `{name}` ({role})", "", doc, ""]
        for attribute, kind in inspect.get_annotations(cls).items():
            out += ["```python", f"{attribute}: {kind}", "```", ""]
        methods = [m for m in cls.__dict__ if not m.startswith("_") and callable(cls.__dict__[m])]
        for method in methods:
            fn = cls.__dict__[method]
            doc = _markdown(" ".join((inspect.getdoc(fn) or "").split()))
            out += ["```python", _signature(method, fn), "```", ""]
            out += [doc or "(no docstring: see [the rules](#the-rules) below)", ""]
    out += ["### Record types", ""]
    for name in RECORDS:
        cls = getattr(store, name)
        out += [f"#### `{name}`", "", _markdown(_first_line(inspect.getdoc(cls))), ""]
        out += ["| field | type | default |", "|---|---|---|"]
        for field in attrs.fields(cls):
            kind = str(field.type).replace("|", "\\|")  # a pipe would end the table cell
            out.append(f"| `{field.name}` | `{kind}` | {_default(field)} |")
        extras = [
            m
            for m, v in cls.__dict__.items()
            if not m.startswith("_") and (inspect.isfunction(v) or isinstance(v, classmethod))
        ]
        if extras:
            out.append("")
            for method in extras:
                fn = cls.__dict__[method]
                fn = fn.__func__ if isinstance(fn, classmethod) else fn
                sig = _signature(method, fn).removeprefix("def ")
                doc = _markdown(_first_line(inspect.getdoc(fn)))
                out.append(f"- `{sig}`" + (f": {doc}" if doc else ""))
        out.append("")
    out.append(END)
    return "\n".join(out)


def generated_part(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def test_the_store_contract_in_storage_md_is_up_to_date() -> None:
    text = DOC.read_text()
    assert BEGIN in text, f"expected the generated part's first marker in {DOC}"
    assert END in text, f"expected the generated part's last marker in {DOC}"
    assert generated_part(text) == render(), (
        "docs/storage.md's store contract is stale: run"
        " `python tests/kernel/test_kits_contract_doc.py`"
    )


def test_every_protocol_method_and_record_field_is_documented() -> None:
    rendered = render()
    for name, _ in PROTOCOLS:
        cls = getattr(store, name)
        for method in (m for m in cls.__dict__ if not m.startswith("_")):
            if callable(cls.__dict__[method]):
                assert f" {method}(" in rendered, f"expected {name}.{method} in the contract"
    for name in RECORDS:
        for field in attrs.fields(getattr(store, name)):
            assert f"| `{field.name}` |" in rendered, f"expected {name}.{field.name} documented"


def test_a_changed_signature_makes_the_check_fail(monkeypatch: Any) -> None:
    """The check is not vacuous: a protocol method with another signature renders differently."""

    class Changed(store.ConversationStore):  # type: ignore[misc]
        async def load_history(self, agent_id: str, session_id: str) -> list[Any]:
            """The messages of one conversation."""
            return []

    before = render()
    monkeypatch.setattr(store, "ConversationStore", Changed)
    assert render() != before


if __name__ == "__main__":
    text = DOC.read_text()
    DOC.write_text(text.replace(generated_part(text), render()))
    sys.stdout.write(f"rewrote the store contract in {DOC}\n")
