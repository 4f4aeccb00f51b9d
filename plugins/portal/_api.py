"""The API routes the portal needs that ``/api/v1`` lacked, added through ``soulacy_http_routes``
and documented in the HTTP plugin's OpenAPI document (plugins/http/openapi.json).

| route | who | what |
|---|---|---|
| ``PUT /agents/{agent_id}`` | admins | create an agent (workspace provider and model, no limits) |
| ``GET /agents/{agent_id}`` | admins | SOUL.yaml, each key's source and plugin, the policy |
| ``PATCH /agents/{agent_id}`` | admins | change fields of SOUL.yaml (``null`` removes a key) |
| ``GET /config/sources`` | admins | where each configuration value is set; kept keys |
| ``GET /plugins`` | admins | the loaded plugins, their hooks and configuration sections |
| ``GET /support/bundle`` | admins | a diagnostic bundle: redacted config, versions, errors |
| ``GET /runs`` | every principal | its own recent runs with status, limits and proof |
| ``POST /runs/{run_id}/reconcile`` | admins | an in-progress workflow step: happened or not |
| ``GET /whoami`` | every principal | who the key is: its principal, whether it is an admin |
| ``GET /runs/{run_id}/timeline`` | the run's principal | turns, model and tool calls, approvals, |
|  |  | compactions, limits and the final status with its evidence (``_timeline.py``) |
| ``GET /conversations?q=`` | every principal | its own conversations: title, agent, last |
|  |  | activity, status; search (``_conversations.py``) |
| ``GET /conversations/{session_id}`` | its principal | one of them |
| ``PATCH /conversations/{session_id}`` | its principal | rename it |
| ``DELETE /conversations/{session_id}`` | its principal | delete it (409: a run going on) |
"""

from __future__ import annotations

import collections
import importlib.metadata
import logging
import platform
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from soulacy.kernel import Kernel, StashKey, UsageError, redact, redact_text
from soulacy.kernel.yamlio import load_yaml_file, plain
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse

from . import _limits, _timeline
from ._agents import AgentPatch, _structure, create_agent, describe_agent, parse_changes
from ._agents import update_agent as _update
from ._conversations import Conversations

PACKAGES = ("attrs", "cattrs", "httpx", "hypercorn", "pluggy", "ruamel.yaml", "trio")
RECENT_ERRORS = 50
RUNS_LIMIT = 200
DECISIONS = ("completed", "failed")
ENDED = ("interrupted", "failed", "cancelled", "incomplete")  # may have left a step in progress


# What a log record about a run may say of it (``extra={...}``): whose run it is. A record
# without them is about the runs whose ids its arguments name, if any (looked up in the store).
RECORD_PRINCIPAL = "soulacy_principal"
RECORD_RUN_ID = "soulacy_run_id"
_RUN_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")  # the ids the API takes (plugins/http)
_UNKNOWN = object()


@attrs.frozen
class KeptRecord:
    """One warning or error as a bundle shows it, and what says whose run it is about."""

    shown: dict[str, Any]
    owner: Any = _UNKNOWN  # the principal the record names (None: a run without one)
    run_ids: tuple[str, ...] = ()  # the runs it may be about


class RecentErrors(logging.Handler):
    """The last warnings and errors of the ``soulacy`` loggers, redacted, for support bundles:
    each bundle holds only those its caller may see (:meth:`visible`)."""

    def __init__(self, size: int = RECENT_ERRORS) -> None:
        super().__init__(logging.WARNING)
        self.records: collections.deque[KeptRecord] = collections.deque(maxlen=size)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = redact_text(record.getMessage())
        except Exception:  # a record that cannot be formatted says so rather than failing
            message = f"(unformattable log record {record.msg!r})"
        shown = {
            "time": record.created,
            "logger": record.name,
            "level": record.levelname.lower(),
            "message": message,
        }
        args = record.args.values() if isinstance(record.args, Mapping) else record.args or ()
        named = getattr(record, RECORD_RUN_ID, None)
        ids = [named] if isinstance(named, str) else []
        ids += [a for a in args if isinstance(a, str) and _RUN_ID.fullmatch(a)]
        owner = getattr(record, RECORD_PRINCIPAL, _UNKNOWN)
        self.records.append(KeptRecord(shown, owner, tuple(dict.fromkeys(ids))))

    async def visible(self, kernel: Kernel, request: HttpRequest) -> list[dict[str, Any]]:
        """The records ``request``'s principal may see: none about another principal's run
        (nor about a run without one, when keys are on); keyless ``local`` sees them all."""
        if request.sees_everything:
            return [kept.shown for kept in self.records]
        store = kernel.store()
        owners: dict[str, Any] = {}
        out = []
        for kept in list(self.records):
            if kept.owner is not _UNKNOWN:
                if request.sees(kept.owner):
                    out.append(kept.shown)
                continue
            for run_id in kept.run_ids:
                if run_id not in owners:
                    found = await store.get_run(run_id)
                    owners[run_id] = found.principal if found else _UNKNOWN
            if all(owners[r] is _UNKNOWN or request.sees(owners[r]) for r in kept.run_ids):
                out.append(kept.shown)
        return out


ERRORS_KEY = StashKey[RecentErrors]("portal recent errors")


def recent_errors(kernel: Kernel) -> RecentErrors:
    """This kernel's collector, attached to the ``soulacy`` logger while it serves."""
    handler = kernel.stash.get(ERRORS_KEY, None)
    if handler is None:
        handler = kernel.stash[ERRORS_KEY] = RecentErrors()
        logging.getLogger("soulacy").addHandler(handler)
    return handler


def detach_errors(kernel: Kernel) -> None:
    handler = kernel.stash.get(ERRORS_KEY, None)
    if handler is not None:
        logging.getLogger("soulacy").removeHandler(handler)
        del kernel.stash[ERRORS_KEY]


def _relative(kernel: Kernel, location: str) -> str:
    root = str(kernel.workspace) + "/"
    return location[len(root) :] if location.startswith(root) else location


def _at(doc: Any, path: str) -> Any:
    node = doc
    for part in path.replace("[", ".").replace("]", "").split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def config_sources(kernel: Kernel) -> dict[str, Any]:
    config = kernel.config
    raw = plain(load_yaml_file(kernel.config_file)) if kernel.config_file.is_file() else {}
    return {
        "file": _relative(kernel, str(kernel.config_file)),
        "sources": {k: _relative(kernel, str(v)) for k, v in config.sources.locations.items()},
        "kept": [
            {
                "path": kept.path,
                "location": _relative(kernel, str(kept.location)),
                "doc": kept.doc,
                "value": redact(_at(raw, kept.path), kept.path.rsplit(".", 1)[-1]),
            }
            for kept in config.kept
        ],
        "warnings": [_relative_text(kernel, w) for w in config.warnings],
    }


def _relative_text(kernel: Kernel, text: str) -> str:
    return text.replace(str(kernel.workspace) + "/", "")


def plugins(kernel: Kernel) -> list[dict[str, Any]]:
    sections: dict[str, list[dict[str, str]]] = {}
    for owned in kernel.sections:
        if owned.section.owns:
            sections.setdefault(owned.plugin, []).append(
                {"key": owned.section.key, "scope": owned.section.scope, "doc": owned.section.doc}
            )
    return [{**info, "sections": sections.get(info["name"], [])} for info in kernel.pm.describe()]


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, Any]:
    return {
        "soulacy": _version("soulacy"),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in PACKAGES},
    }


async def _runs(kernel: Kernel, request: HttpRequest, limit: int) -> list[dict[str, Any]]:
    """The principal's recent runs (keyless ``local``: every run), newest first."""
    store = kernel.store()
    if request.sees_everything:
        visible = await store.list_runs(limit)
    else:  # the store filters: others' runs neither hide the caller's nor cost a read
        visible = await store.list_runs(limit, principal=request.principal)
    out = []
    for record in visible:
        proof = await store.get_proof(record.run_id)
        meta = dict(record.metadata or {})
        in_progress: list[str] = []
        if record.status in ENDED:  # a workflow's step an operator must decide on
            checkpoints = await store.load_checkpoints(record.run_id)
            in_progress = [c.step_id for c in checkpoints if c.status == "in_progress"]
        out.append(
            {
                "run_id": record.run_id,
                "agent_id": record.agent_id,
                "session_id": record.session_id,
                "status": record.status,
                "verification": record.verification,
                "incomplete_reason": record.incomplete_reason,
                "error": meta.get("error"),
                "started_at": record.started_at,
                "finished_at": record.finished_at,
                "attempt": record.attempt,
                "turns": meta.get("turns"),
                "tokens": (meta.get("tokens") or {}).get("total"),
                "cost_usd": meta.get("cost_usd"),
                "proof": {"sha256": proof.sha256, "receipts": proof.receipts} if proof else None,
                "lease": record.lease if record.status == "interrupted" else None,
                "limits": await _limits.load(kernel, record.run_id),
                "steps_in_progress": in_progress,
            }
        )
    return out


class PortalApi:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.errors = recent_errors(kernel)

    def _known(self, agent_id: str) -> None:
        # Only the workspace's agents: a request's agent id never reaches the file system.
        if agent_id not in self.kernel.agent_ids():
            raise HttpError(404, f"no agent {agent_id!r}")

    async def create_agent(self, request: HttpRequest) -> HttpResponse:
        agent_id = request.params["agent_id"]
        create_agent(self.kernel, agent_id, await request.json())
        return HttpResponse.json(
            describe_agent(self.kernel, agent_id),
            201,
            {"location": f"/api/v1/agents/{agent_id}"},
        )

    async def get_agent(self, request: HttpRequest) -> HttpResponse:
        agent_id = request.params["agent_id"]
        self._known(agent_id)
        return HttpResponse.json(describe_agent(self.kernel, agent_id))

    async def update_agent(self, request: HttpRequest) -> HttpResponse:
        agent_id = request.params["agent_id"]
        self._known(agent_id)
        body: AgentPatch = _structure(await request.json(), AgentPatch, "body")
        changes = parse_changes(body.changes)
        changed = _update(self.kernel, agent_id, changes)
        return HttpResponse.json({"changed": changed, **describe_agent(self.kernel, agent_id)})

    async def config_sources(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse.json(config_sources(self.kernel))

    async def plugins(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse.json({"plugins": plugins(self.kernel), "versions": versions()})

    async def runs(self, request: HttpRequest) -> HttpResponse:
        raw = request.query_value("limit")
        limit = 50
        if raw is not None:
            if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= RUNS_LIMIT):
                raise HttpError(
                    422, "invalid query", {"limit": f"expected an integer from 1 to {RUNS_LIMIT}"}
                )
            limit = int(raw)
        runs = await _runs(self.kernel, request, limit)
        return HttpResponse.json({"runs": runs, "can_reconcile": request.is_admin})

    async def reconcile(self, request: HttpRequest) -> HttpResponse:
        """An operator's decision on a workflow step found in progress: its action happened
        (``completed``: not run again) or did not (``failed``: run again on retry). The
        workflows plugin decides, under the run's lease, as ``soulacy runs reconcile`` does."""
        run_id = request.params["run_id"]
        body = await request.json()
        problems: dict[str, str] = {}
        if not isinstance(body, dict):
            raise HttpError(422, "invalid request body", {"body": "expected a JSON object"})
        step, decision = body.get("step"), body.get("decision")
        if not isinstance(step, str) or not 1 <= len(step) <= 200:
            problems["step"] = "expected the id of the step in progress (1-200 characters)"
        if decision not in DECISIONS:
            problems["decision"] = "expected 'completed' (it happened) or 'failed' (it did not)"
        for key in sorted(set(body) - {"step", "decision"}):
            problems[key] = "unknown field"
        if problems:
            raise HttpError(422, "invalid request body", problems)
        # The workflows plugin's hook (defined by it: absent when it is not loaded).
        decide = getattr(self.kernel.hook, "soulacy_reconcile_step", None)
        if decide is None:
            raise HttpError(
                404, "the workflows plugin is not loaded: there are no steps to reconcile"
            )
        # An admin reconciles the runs it sees; another principal's run is not confirmed to
        # exist (the operator's `soulacy runs reconcile` acts on any).
        record = await self.kernel.store().get_run(run_id)
        if record is None or not request.sees(record.principal):
            raise HttpError(404, f"no run {run_id!r}")
        try:
            pending = decide(kernel=self.kernel, run_id=run_id, step=step, decision=decision)
            if pending is None:
                raise HttpError(404, "no loaded plugin reconciles workflow steps")
            said = await pending
        except UsageError as exc:
            message = str(exc)
            if " is running" in message:  # without the pid and host the CLI shows an operator
                message = f"run {run_id!r} is running: reconcile it once that run has stopped"
            raise HttpError(404 if " has no " in message else 409, message) from None
        return HttpResponse.json(
            {"run_id": run_id, "step": step, "decision": decision, "said": said}
        )

    async def timeline(self, request: HttpRequest) -> HttpResponse:
        """One run's timeline, for its own principal (another's run is not confirmed to
        exist): what its record says, and each step the portal kept of it."""
        run_id = request.params["run_id"]
        record = await self.kernel.store().get_run(run_id)
        if record is None or not request.sees(record.principal):
            raise HttpError(404, f"no run {run_id!r}")
        kept, live = await _timeline.load(self.kernel, run_id)
        meta = dict(record.metadata or {})
        proof = await self.kernel.store().get_proof(run_id)
        return HttpResponse.json(
            {
                "run_id": run_id,
                "agent_id": record.agent_id,
                "session_id": record.session_id,
                "status": record.status,
                "verification": record.verification,
                "incomplete_reason": record.incomplete_reason,
                "error": meta.get("error"),
                "evidence": meta.get("evidence"),
                "started_at": record.started_at,
                "finished_at": record.finished_at,
                "attempt": record.attempt,
                "limits": await _limits.load(self.kernel, run_id),  # the last attempt's
                "turns": meta.get("turns"),
                "tokens": meta.get("tokens"),
                "cost_usd": meta.get("cost_usd"),
                "proof": {"sha256": proof.sha256, "receipts": proof.receipts} if proof else None,
                "live": live,
                "kept": kept is not None,
                "entries": (kept or {}).get("entries", []),
                "left_out": (kept or {}).get("left_out", 0),
            },
            headers={"cache-control": "no-store"},
        )

    async def whoami(self, request: HttpRequest) -> HttpResponse:
        """Who the request's key says it is (keyless loopback mode: ``local``, an admin that
        sees every principal's runs): what the portal's header shows."""
        return HttpResponse.json(
            {
                "principal": request.principal,
                "admin": request.is_admin,
                "sees_everything": request.sees_everything,
            },
            headers={"cache-control": "no-store"},
        )

    async def support_bundle(self, request: HttpRequest) -> HttpResponse:
        kernel = self.kernel
        agents = []
        for agent_id in kernel.agent_ids():
            try:
                spec = kernel.agent(agent_id)
                agents.append({"id": agent_id, "valid": True, "enabled": spec.section("enabled")})
            except Exception as exc:  # a broken agent file is what a bundle is for
                agents.append(
                    {"id": agent_id, "valid": False, "error": _relative_text(kernel, str(exc))}
                )
        failed = [
            {k: run[k] for k in ("run_id", "agent_id", "status", "error", "finished_at")}
            for run in await _runs(kernel, request, 50)
            if run["status"] in ("failed", "interrupted")
        ]
        now = time.time()
        bundle = {
            "generated_at": now,
            "versions": versions(),
            "plugins": [
                {k: p[k] for k in ("name", "origin", "module", "distribution", "version")}
                for p in plugins(kernel)
            ],
            "config": redact(kernel.config.to_dict()),
            "config_sources": config_sources(kernel),
            "agents": agents,
            "recent_errors": await self.errors.visible(kernel, request),
            "failed_runs": failed,
        }
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
        return HttpResponse.json(
            bundle,
            headers={
                "content-disposition": f'attachment; filename="soulacy-support-{stamp}.json"',
                "cache-control": "no-store",
            },
        )


def api_routes(kernel: Kernel) -> Sequence[Any]:
    from soulacy.plugins.http import HttpRoute

    api = PortalApi(kernel)
    conversations = Conversations(kernel)
    agent = "/agents/(?P<agent_id>[^/]+)"
    conversation = "/conversations/(?P<session_id>[^/]+)"
    return [
        HttpRoute("GET", agent, api.get_agent, auth="admin"),
        HttpRoute("PUT", agent, api.create_agent, auth="admin"),
        HttpRoute("PATCH", agent, api.update_agent, auth="admin"),
        HttpRoute("GET", "/config/sources", api.config_sources, auth="admin"),
        HttpRoute("GET", "/plugins", api.plugins, auth="admin"),
        HttpRoute("GET", "/support/bundle", api.support_bundle, auth="admin"),
        HttpRoute("GET", "/runs", api.runs),
        HttpRoute("POST", "/runs/(?P<run_id>[^/]+)/reconcile", api.reconcile, auth="admin"),
        HttpRoute("GET", "/whoami", api.whoami),
        HttpRoute("GET", "/runs/(?P<run_id>[^/]+)/timeline", api.timeline),
        HttpRoute("GET", "/conversations", conversations.list),
        HttpRoute("GET", conversation, conversations.get),
        HttpRoute("PATCH", conversation, conversations.rename),
        HttpRoute("DELETE", conversation, conversations.delete),
    ]
