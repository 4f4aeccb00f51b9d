"""The hook the policy plugin defines for other plugins (added with ``soulacy_addhooks``).

A plugin declares limits of its own with the kernel's ``soulacy_policy_limits``, and a run's
resolved policy holds them. A plugin that needs one outside a run (studio, for a build of an
agent whose file does not load) asks this hook for the workspace value, read as the policy reads
it, instead of reading its section with a copy of the policy's rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from soulacy.kernel import hookspec

if TYPE_CHECKING:
    from soulacy.kernel import Settings
    from soulacy.kernel.policy import Limit, PolicyLimit


@hookspec(firstresult=True)
def soulacy_workspace_limit(config: Settings, declared: PolicyLimit) -> Limit[Any] | None:
    """The workspace value of the declared limit ``declared``, with its source (config.yaml,
    the environment or the default) and location: ``unlimited_at`` read as unlimited,
    ``selects_default`` as the declared default, the default when no loaded plugin owns its key.
    Its ``adjust`` rule is not applied: outside a run there are no core limits to relate to.

    With the policy plugin disabled the hook does not exist: a caller looks it up with
    ``getattr(kernel.hook, "soulacy_workspace_limit", None)`` and has a default of its own.
    """
