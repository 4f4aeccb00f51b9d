"""docs/hooks.md follows the hook specifications: a hook changed without the docs fails."""

from __future__ import annotations

import types
from pathlib import Path

import pluggy

from soulacy.kernel import hookspecs
from soulacy.testing import hookdoc

DOC = Path(__file__).parents[2] / "docs" / "hooks.md"


def test_the_hook_reference_is_up_to_date() -> None:
    assert DOC.read_text() == hookdoc.render(), (
        "docs/hooks.md is stale: run `python -m soulacy.testing.hookdoc > docs/hooks.md`"
    )


def test_every_hook_has_a_docstring_and_a_group() -> None:
    for group, name, _, _, doc in hookdoc.hooks():
        assert doc.strip(), f"{name} has no docstring"
        assert group != "Other", f"{name} is not under a banner comment in hookspecs.py"


def test_an_added_hook_makes_the_docs_check_fail() -> None:
    """The check is not vacuous: a module with one more hook renders differently."""
    extra = types.ModuleType("extra_specs")
    source = (
        Path(hookspecs.__file__).read_text()
        + '''

@hookspec
def soulacy_brand_new(kernel: Kernel) -> None:
    """A hook nobody documented."""
'''
    )
    exec(compile(source, "extra_specs.py", "exec"), extra.__dict__)
    rendered = hookdoc.render(extra, source)
    assert rendered != DOC.read_text()
    assert "### `soulacy_brand_new`" in rendered


def test_the_hook_names_match_the_plugin_manager() -> None:
    pm = pluggy.PluginManager("soulacy")
    pm.add_hookspecs(hookspecs)
    documented = {name for _, name, _, _, _ in hookdoc.hooks()}
    assert documented == {n for n in dir(pm.hook) if n.startswith("soulacy_")}
