"""Editing a person's YAML files so that only what changed differs: a library, not a plugin.

The kernel reads configuration (``soulacy.kernel.yamlio``: ``parse_yaml``, ``load_yaml_file``,
``plain``); writing it back is here, for every editor to share — ``soulacy config set`` and
``PATCH /config`` (through the ``core`` plugin's ``soulacy_save_config``), the portal's agent
editor and Studio. ``apply_changes`` merges changed fields into a parsed document (a mapping
merges, never replaces); ``dump_round_trip`` writes with the file's own indentation and nulls;
``atomic_write`` replaces a file whole or not at all; ``trust_root_changes`` is the one check
an editor outside the trust root makes first (what it may not change). Importing it registers
nothing.
"""

from ._config import save_config_changes
from ._edit import apply_changes
from ._trust_root import trust_root_changes
from ._write import atomic_write, dump_round_trip, guess_indentation, keep_unchanged_lines

__all__ = [
    "apply_changes",
    "atomic_write",
    "dump_round_trip",
    "guess_indentation",
    "keep_unchanged_lines",
    "save_config_changes",
    "trust_root_changes",
]
