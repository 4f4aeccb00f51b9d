"""The SQLite store (being built)."""
