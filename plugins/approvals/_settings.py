"""The ``approvals`` plugin's settings: a module of its own, imported when the configuration is
read, so that registering the plugin (``soulacy --help``) imports neither attrs' classes nor the
configuration's machinery (decision 0036)."""

from __future__ import annotations

import attrs


@attrs.frozen
class ApprovalsConfig:
    """``approvals:`` in config.yaml.

    ``wait_counts_against_timeout`` (default true): the time a run waits for a decision is
    part of its run timeout (``runtime.timeouts.run``, 48h by default), so a forgotten
    approval still ends the run, as ``incomplete (run_timeout)``. With false the wait is not
    counted (the run's deadline moves by the wait); parent deadlines still apply.
    """

    wait_counts_against_timeout: bool = True
