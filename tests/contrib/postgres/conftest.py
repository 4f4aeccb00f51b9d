"""Fixtures of the PostgreSQL store tests: one server per session, databases per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pg_support import Server, start_server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """An embedded PostgreSQL (or the server of ``SOULACY_TEST_POSTGRES_DSN``) for the session."""
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def database(postgres_server: Server) -> str:
    """The DSN of a new, empty database of the test's own."""
    return postgres_server.new_database()
