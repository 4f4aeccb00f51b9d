"""First-party plugins, loaded by default; each is a package written like a third-party plugin."""
