"""Extractive context compaction (being built)."""
