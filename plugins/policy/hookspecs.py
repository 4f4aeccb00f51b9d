"""The hook the policy plugin defines for other plugins (added with ``soulacy_addhooks``).

The policy plugin owns the workspace's limits (``runtime``, ``costs``, ``llm.studio``); a plugin
that needs one of them outside a run's resolved policy (studio, for a build of an agent whose
file does not load) asks this hook instead of reading the section with a copy of the rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from soulacy.kernel import hookspec

if TYPE_CHECKING:
    from soulacy.kernel import Settings
    from soulacy.kernel.policy import Limit


@hookspec(firstresult=True)
def soulacy_workspace_limit(config: Settings, path: str, unlimited_at: Any) -> Limit[Any] | None:
    """The limit at the dotted ``path`` of the workspace configuration, with its source
    (config.yaml, the environment or the default) and location. ``unlimited_at`` is the value
    that means unlimited (``Limit.value`` None then): ``0`` for most, ``-1`` for counts where
    ``0`` means something else. None when the answering plugin does not own ``path``.

    With the policy plugin disabled the hook does not exist: a caller looks it up with
    ``getattr(kernel.hook, "soulacy_workspace_limit", None)`` and has a default of its own.
    """
