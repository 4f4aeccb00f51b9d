"""First-party plugins, loaded by default; each is a package written like a third-party plugin.

One package here is a library, not a plugin: ``providerkit`` (the httpx toolkit that HTTP model
providers share) implements no hooks and is never registered.
"""
