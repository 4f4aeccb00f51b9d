"""Soulacy's testing plugin gives these tests the ``workspace`` and ``make_kernel`` fixtures.

It is opt-in: installing Soulacy adds no fixture to any test suite that does not ask for it.
"""

pytest_plugins = ["soulacy.testing.pytest_plugin"]
