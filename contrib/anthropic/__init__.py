"""Anthropic Messages API provider (being built)."""
