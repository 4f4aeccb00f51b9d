"""The store roles both SQL stores play alike, as one base class."""

from __future__ import annotations

from ._base import C
from ._events import EventsMixin
from ._leases import LeasesMixin
from ._records import RecordsMixin
from ._runs import RunsMixin


class SQLStore(RunsMixin[C], RecordsMixin[C], LeasesMixin[C], EventsMixin[C]):
    """Every store role over SQL, but the connections, transactions and locks: a subclass
    gives ``dialect`` and ``retention``, ``_read`` and ``_write``, ``_entries``,
    ``_tool_records`` and ``_lease_to_grant``, and the hooks its database needs
    (``_lock_run``, ``_lock_cancels``, ``_announce``, ``_announced``, ``_pruned``). What it
    writes its own way (a turn, a counter's spend) and its waits stay its own."""
