"""Security review of the redaction of configuration error values (kernel/_errors.py): the value
is redacted by the *last* path component only, so a value under a secret map (an API key of
``server.api_keys.<principal>``, a header of ``…headers.<name>``) is printed when it has the
wrong type — e.g. an all-digit key, which YAML reads as an integer."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from soulacy.kernel import ConfigError, Kernel
from soulacy.testing import Workspace


@pytest.mark.parametrize(
    ("config", "secret"),
    [
        ("server:\n  port: 0\n  api_keys: {alice: 98765432109876}\n", "98765432109876"),
        ("server:\n  port: 0\n  api_keys: {alice: [key-in-a-list-1]}\n", "key-in-a-list-1"),
        (
            "mcp:\n  servers:\n    s:\n      url: https://x.example/mcp\n      enabled: false\n"
            "      headers: {X-Tenant: [hdr-in-a-list-2]}\n",
            "hdr-in-a-list-2",
        ),
    ],
)
def test_review_a_mistyped_secret_is_not_printed_in_the_config_error(
    workspace: Workspace, make_kernel: Callable[..., Kernel], config: str, secret: str
) -> None:
    workspace.write_config(config)
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert secret not in str(caught.value), str(caught.value)
