"""Fixtures shared by the plugins' tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from soulacy.plugins.sqlite_store import SQLiteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """An SQLite store on ``tmp_path / "store.db"``, opened, closed after the test."""
    opened = SQLiteStore(tmp_path / "store.db")
    await opened.open()
    try:
        yield opened
    finally:
        await opened.aclose()
