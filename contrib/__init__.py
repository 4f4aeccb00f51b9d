"""Optional plugins with extra dependencies, off by default (enable with ``-p`` or config.yaml)."""
