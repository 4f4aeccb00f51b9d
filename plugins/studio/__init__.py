"""Studio builds (being built)."""
