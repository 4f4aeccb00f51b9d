"""The ``approvals`` plugin's settings: a module of its own, imported when the configuration is
read, so that registering the plugin (``soulacy --help``) imports neither attrs' classes nor the
configuration's machinery (decision 0036)."""

from __future__ import annotations

from typing import Literal

import attrs

from soulacy.kernel import Duration


@attrs.frozen
class ApprovalsConfig:
    """``approvals:`` in config.yaml.

    ``wait_counts_against_timeout`` (default true): the time a run waits for a decision is
    part of its run timeout (``runtime.timeouts.run``, 48h by default), so a forgotten
    approval still ends the run, as ``incomplete (run_timeout)``. With false the wait is not
    counted (the run's deadline moves by the wait); parent deadlines still apply.

    ``expire_after`` (default 7 days; ``"0"``: never): a request nobody decides within this is
    denied by ``soulacy (expired)``, written as any decision is (a proof receipt); with
    ``on_expiry: cancel`` the run then ends ``cancelled (approval_expired)`` instead of the
    model being told the call was denied.

    ``suspend_after`` (default 5 minutes; ``"0"``: never): a run still waiting this long is
    suspended to the store: it gives back its task, its concurrency slot and its
    conversation's lease, ends ``interrupted (awaiting_approval)`` for its caller, and the
    decision, made on any process, resumes it there (a same-id retry).
    """

    wait_counts_against_timeout: bool = True
    expire_after: Duration = Duration(7 * 24 * 3600)
    on_expiry: Literal["deny", "cancel"] = "deny"
    suspend_after: Duration = Duration(5 * 60)
