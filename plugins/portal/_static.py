"""The portal's files: plain ES modules, CSS and one HTML page, shipped as package data.

Nothing is built at install time and nothing is fetched from elsewhere: the Content-Security-
Policy of every answer allows this server's own scripts, styles and API only
(docs/decisions/0031-portal-without-a-build.md).
"""

from __future__ import annotations

import hashlib
import importlib.resources
from collections.abc import Mapping

import attrs

from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse

INDEX = "index.html"
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
}
# Only this server: no CDN, no fonts, no inline script; the API is same-origin.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:;"
    " connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}


@attrs.frozen
class StaticFile:
    name: str
    body: bytes
    content_type: str
    etag: str


def load_files() -> dict[str, StaticFile]:
    """Every file of the package's ``static`` folder, by name (the folder is flat)."""
    folder = importlib.resources.files("soulacy.plugins.portal").joinpath("static")
    files = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if not entry.is_file() or suffix not in TYPES or entry.name.startswith("."):
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        files[entry.name] = StaticFile(entry.name, body, TYPES[suffix], etag)
    return files


class StaticFiles:
    """Answers ``GET /`` and ``GET /portal/`` with the page and ``GET /portal/NAME`` with a file."""

    def __init__(self, files: Mapping[str, StaticFile] | None = None) -> None:
        self.files = dict(load_files() if files is None else files)

    def answer(self, name: str, request: HttpRequest) -> HttpResponse:
        found = self.files.get(name)
        if found is None:
            raise HttpError(404, "not found")
        headers = {**SECURITY_HEADERS, "content-type": found.content_type, "etag": found.etag}
        if request.headers.get("if-none-match") == found.etag:
            return HttpResponse(304, b"", headers)
        return HttpResponse(200, found.body, headers)

    async def index(self, request: HttpRequest) -> HttpResponse:
        return self.answer(INDEX, request)

    async def file(self, request: HttpRequest) -> HttpResponse:
        return self.answer(request.params["name"], request)
