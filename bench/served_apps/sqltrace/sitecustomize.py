"""Every SQL statement of this process's sqlite3 connections, one a line, in ``$SOULACY_SQLTRACE``.

bench/served.py puts this folder first on ``PYTHONPATH`` of one extra ``soulacy serve`` to
count the statements and transactions a served chat costs (never on a measured server: the
trace costs time of its own).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

_connect = sqlite3.connect
_out = open(os.environ["SOULACY_SQLTRACE"], "a", buffering=1, encoding="utf-8")  # noqa: SIM115


def _traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _connect(*args, **kwargs)
    conn.set_trace_callback(lambda sql: _out.write(" ".join(sql.split())[:120] + "\n"))
    return conn


sqlite3.connect = _traced
