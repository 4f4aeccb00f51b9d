"""Short-lived tokens that let a browser's EventSource read one run's events.

EventSource cannot send ``Authorization``, so the run's owner gets a token (in the
``Soulacy-Events-Token`` header of ``POST /chat`` and ``/chat/stream``, or from
``POST /runs/{run_id}/token``) and passes it as ``?token=`` to ``GET /runs/{run_id}/events``.
A token is ``v2.<expiry>.<principal>.<mac>``: an HMAC-SHA256 over the purpose, the run id, the
principal, a digest of the principal's key and the expiry (unix seconds), keyed by 32 random
bytes. A process alone on its store draws them when it starts; processes that share a store
share them too (:func:`shared_secret`, kept in the store), so a token issued by one is good on
another behind the same load balancer, and after a restart. A token reads one run's events, as
one principal, until it expires or the principal's key is removed or rotated (the key's digest
no longer matches); it grants nothing else. See docs/security.md for the threat model.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ._asgi import HttpError

if TYPE_CHECKING:
    from soulacy.kernel import Kernel

_SHAPE = re.compile(r"v2\.([0-9]{1,12})\.([A-Za-z0-9_-]{1,400})\.([A-Za-z0-9_-]{43})")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


SECRET_KEY = "http.events_token_secret"  # the store's state key of the shared secret


async def shared_secret(kernel: Kernel) -> bytes:
    """The secret of every process on the kernel's store: drawn by the first to ask, under a
    lease (two processes starting at once draw one), and kept as the store's state."""
    store = kernel.store()
    found = await store.load_state(SECRET_KEY)
    if found is None:
        held = await kernel.leases.acquire(SECRET_KEY, holder="http")  # waits its turn
        assert held is not None
        try:
            found = await store.load_state(SECRET_KEY)  # drawn meanwhile by another
            if found is None:
                found = {"secret": secrets.token_hex(32)}
                await store.save_state(SECRET_KEY, found, fence=held.lease)
        finally:
            await kernel.leases.release(held)
    return bytes.fromhex(str(found["secret"]))


class EventTokens:
    """Issues and checks the tokens of one server process."""

    def __init__(
        self,
        lifetime: int,
        *,
        secret: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lifetime = lifetime
        self._secret = secret or secrets.token_bytes(32)
        self._clock = clock

    def issue(self, run_id: str, principal: str, key: str) -> tuple[str, int]:
        """A token for ``principal`` (whose bearer key is ``key``) to read ``run_id``'s events,
        and its expiry (unix s)."""
        expires = int(self._clock()) + self.lifetime
        return self._token(run_id, principal, key, expires), expires

    def verify(self, token: str, run_id: str, keys: Mapping[str, str]) -> str:
        """The principal the token was issued to; HttpError 401 when it does not hold: forged,
        for another run, expired, or its principal's key (``keys``: principal -> bearer key)
        removed or rotated since.

        Messages never repeat the token: answers and logs must not carry it.
        """
        shape = _SHAPE.fullmatch(token)
        if shape is None:
            raise HttpError(401, "invalid events token")
        expires = int(shape.group(1))
        try:
            principal = _unb64(shape.group(2)).decode()
        except (ValueError, UnicodeDecodeError):
            raise HttpError(401, "invalid events token") from None
        key = keys.get(principal)
        if key is None:  # its key was removed since: the token goes with it
            raise HttpError(401, "invalid events token")
        # A rotated key changes the digest in the MAC: what was minted for the old one fails.
        expected = self._token(run_id, principal, key, expires)
        if not hmac.compare_digest(expected.encode(), token.encode()):
            raise HttpError(401, "invalid events token (or one for another run)")
        if expires < self._clock():
            raise HttpError(401, "the events token expired; ask POST /runs/{run_id}/token again")
        return principal

    def _token(self, run_id: str, principal: str, key: str, expires: int) -> str:
        # Fields joined by NUL: no run id or principal can shift a field boundary. The key
        # enters as a fixed-size digest: the MAC (under the secret) gives no handle on it.
        digest = hashlib.sha256(b"soulacy-events-key\0" + key.encode()).digest()
        message = b"\0".join([b"soulacy-events-v2", run_id.encode(), principal.encode(), digest])
        mac = hmac.new(self._secret, message + b"\0" + str(expires).encode(), hashlib.sha256)
        return f"v2.{expires}.{_b64(principal.encode())}.{_b64(mac.digest())}"
