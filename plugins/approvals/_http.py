"""``POST /api/v1/chat/confirm``: a principal decides a tool call of one of its runs.

A decision is ``approved: true`` (run it), ``approved: false`` (deny it), or, for a call cut
while it ran (``cut:<call id>``), ``result``: it happened, this is its result, and it is not
run again (``approved`` then false or absent; decision 0081)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

from soulacy.kernel import ConfigError, Kernel, structure
from soulacy.kernel.store import EVERY_PRINCIPAL, AlreadyDecided
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse, HttpRoute

from ._keeper import (
    ApprovalClosed,
    ApprovalMismatch,
    ApprovalResultRefused,
    approvals_of,
    result_problem,
)
from ._service import resume_service

_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")  # as the HTTP plugin's run and session ids


@attrs.frozen
class ConfirmBody:
    """The original format's ``{call_id, approved, approver}``, with the run it belongs to."""

    run_id: str
    call_id: str
    approved: bool | None = None  # required, unless ``result`` is given (then false or absent)
    approver: str | None = None
    note: str | None = None
    # The request's ``arguments_sha256`` as the person was shown it: the decision then
    # applies to those arguments only (409 otherwise).
    arguments_sha256: str | None = None
    # A call cut while it ran happened: its result, as the person gives it (not run again).
    result: str | None = None


def _parse(data: Any) -> ConfirmBody:
    if not isinstance(data, dict):
        raise HttpError(422, "invalid request body", {"body": "expected a JSON object"})
    try:
        body: ConfirmBody = structure(data, ConfirmBody, origin="request", key="body")
    except ConfigError as exc:
        fields = {issue.path.removeprefix("body."): issue.message for issue in exc.issues}
        raise HttpError(422, "invalid request body", fields) from None
    for name in ("run_id", "call_id"):
        if not _ID.fullmatch(getattr(body, name)):
            raise HttpError(
                422,
                "invalid request body",
                {name: "expected 1-200 characters: letters, digits and ._:@-"},
            )
    if body.approver is not None and not 0 < len(body.approver.strip()) <= 200:
        raise HttpError(422, "invalid request body", {"approver": "expected 1-200 characters"})
    digest = body.arguments_sha256
    if digest is not None and not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise HttpError(
            422, "invalid request body", {"arguments_sha256": "expected 64 hexadecimal digits"}
        )
    if body.note is not None and len(body.note) > 2000:
        raise HttpError(422, "invalid request body", {"note": "expected at most 2000 characters"})
    if body.result is None and body.approved is None:
        raise HttpError(
            422,
            "invalid request body",
            {"approved": "required (true or false), unless result is given"},
        )
    if body.result is not None and body.approved:
        raise HttpError(
            422,
            "invalid request body",
            {
                "approved": "expected false or absent with a result: a call that happened is not"
                " run again"
            },
        )
    problem = None if body.result is None else result_problem(body.result)
    if problem is not None:
        raise HttpError(422, "invalid request body", {"result": problem})
    return body


def routes(kernel: Kernel) -> Sequence[HttpRoute]:
    async def confirm(request: HttpRequest) -> HttpResponse:
        body = _parse(await request.json())
        principal = EVERY_PRINCIPAL if request.sees_everything else request.principal
        approver = (body.approver or "").strip() or request.principal or "local"
        try:
            decided = await approvals_of(kernel).decide(
                body.run_id,
                body.call_id,
                approved=bool(body.approved),
                approver=approver,
                decided_by=request.principal,
                note=body.note,
                principal=principal,
                digest=body.arguments_sha256,
                result=body.result,
            )
        except AlreadyDecided as exc:
            raise HttpError(409, str(exc), extra={"approval": exc.request.describe()}) from None
        except (ApprovalClosed, ApprovalMismatch) as exc:
            raise HttpError(409, str(exc)) from None
        except ApprovalResultRefused as exc:
            raise HttpError(422, "invalid request body", {"result": str(exc)}) from None
        if decided is None:  # never says whether another principal's run exists
            raise HttpError(
                404, f"no approval request for call {body.call_id!r} of run {body.run_id!r}"
            )
        resumed = False
        if decided.resume:
            resumed = await resume_service(kernel).resume_started(decided.request)
            if not resumed:
                raise HttpError(
                    503,
                    f"the decision is stored, but run {body.run_id!r} could not be resumed here"
                    " (the approvals service is not running); retry the run with its id",
                )
        answer = {**decided.request.describe(), "woke": decided.woke, "resumed": resumed}
        return HttpResponse.json(answer)

    return [HttpRoute("POST", "/chat/confirm", confirm)]
