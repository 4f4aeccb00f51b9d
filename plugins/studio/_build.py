"""The build loop: ask the model for a SOUL.yaml, validate it, run its checks, repeat with the
problems until it passes or an allowance runs out; then save it atomically."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

from soulacy.kernel import ConfigError, Kernel, SoulacyError, UsageError
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, Usage
from soulacy.kernel.providers import Provider, ProviderError
from soulacy.kernel.yamlio import parse_yaml as parse
from soulacy.plugins.yamledit import atomic_write

from ._allowances import Allowances, resolve_allowances
from ._checks import CheckResult, run_check
from ._document import Candidate, compose, extract_yaml
from ._prompt import Previous, system_prompt, user_prompt
from ._scratch import AGENT_FILE, AGENTS_DIR, candidate_kernel, scratch_workspace
from ._spec import LIMIT_PATHS, BuildSpec, as_spec

Status = Literal["completed", "incomplete", "failed"]


@attrs.define
class BuildResult:
    """How a build ended. ``status`` is ``incomplete`` when an allowance stopped it (``reason``
    names it), ``failed`` when it could not go on (``provider_error``, ``agent_file_changed``,
    ``explicit_limit_invalid``); ``errors`` are the last attempt's problems."""

    build_id: str
    agent_id: str
    mode: Literal["new", "repair"]
    status: Status = "failed"
    reason: str | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: no model call had a known price
    elapsed_s: float = 0.0
    path: Path | None = None  # the saved file, once completed
    changed: bool = False  # False when the saved file already said exactly this
    errors: list[str] = attrs.Factory(list)
    checks: list[dict[str, Any]] = attrs.Factory(list)  # the last attempt's check results
    stripped: list[str] = attrs.Factory(list)  # limits the model embedded, not in the file
    candidate: str | None = None  # the last attempt's file, saved or not
    limits: dict[str, Any] = attrs.Factory(dict)  # the resolved allowances, with sources
    warnings: list[str] = attrs.Factory(list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "build_id": self.build_id,
            "agent_id": self.agent_id,
            "mode": self.mode,
            "status": self.status,
            "reason": self.reason,
            "attempts": self.attempts,
            "tokens": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "total": self.tokens,
            },
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "elapsed_s": round(self.elapsed_s, 3),
            "path": str(self.path) if self.path else None,
            "changed": self.changed,
            "errors": list(self.errors),
            "checks": list(self.checks),
            "stripped": list(self.stripped),
            "candidate": self.candidate,
            "limits": dict(self.limits),
            "warnings": list(self.warnings),
        }


class _Stop(Exception):
    """Ends the loop with a status (raised where an allowance or a failure is found)."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


async def build(kernel: Kernel, spec: BuildSpec | Mapping[str, Any]) -> BuildResult:
    """Generate (or repair) ``agents/<id>/SOUL.yaml`` with a model until it validates and its
    checks pass, within the resolved Studio allowances. Bad input raises UsageError; how the
    build went, limits included, is in the result."""
    spec = as_spec(spec)
    path = kernel.workspace / AGENTS_DIR / spec.id / AGENT_FILE
    original = _read(path)
    if original is not None:
        try:
            parse(original, str(path))
        except ConfigError as exc:
            raise UsageError(
                f"cannot repair {path}: it is not valid YAML, so what it says cannot be kept"
                f" ({exc.issues[0]}); fix its syntax first"
            ) from None
    name, model = _builder_model(kernel, spec)
    provider = kernel.providers.provider(name)
    allowances = await resolve_allowances(kernel, spec.id, exists=original is not None)
    result = BuildResult(
        uuid.uuid4().hex[:12],
        spec.id,
        "new" if original is None else "repair",
        limits=allowances.to_dict(),
    )
    await _Builder(kernel, spec, path, original, provider, name, model, allowances, result).run()
    return result


class _Builder:
    def __init__(
        self,
        kernel: Kernel,
        spec: BuildSpec,
        path: Path,
        original: str | None,
        provider: Provider,
        provider_name: str,
        model: str | None,
        allowances: Allowances,
        result: BuildResult,
    ) -> None:
        self.kernel, self.spec, self.path, self.original = kernel, spec, path, original
        self.provider, self.provider_name, self.model = provider, provider_name, model
        self.allowances, self.result = allowances, result
        self.cost = 0.0
        self.unpriced = False

    async def run(self) -> None:
        kernel, result = self.kernel, self.result
        started = trio.current_time()
        await kernel.events.emit(
            "studio.started",
            {"agent_id": result.agent_id, "mode": result.mode, "limits": result.limits},
            run_id=result.build_id,
        )
        elapsed = self.allowances.max_build_elapsed.value
        with ExitStack() as stack:
            scratch = None
            if self.spec.checks:
                scratch = stack.enter_context(scratch_workspace(kernel.workspace, self.spec.id))
            with trio.move_on_after(math.inf if elapsed is None else elapsed) as scope:
                try:
                    await self._loop(scratch)
                except _Stop as stop:
                    result.status, result.reason = stop.status, stop.reason
            if scope.cancelled_caught:
                result.status, result.reason = "incomplete", "max_build_elapsed"
        result.elapsed_s = trio.current_time() - started
        if self.unpriced and self.allowances.max_build_cost_usd.value is not None:
            result.warnings.append(
                "max_build_cost_usd is set but some model calls had no known price"
                " (costs.pricing); their spend is not counted"
            )
        await kernel.events.emit("studio.finished", result.to_dict(), run_id=result.build_id)

    async def _loop(self, scratch: Path | None) -> None:
        spec, result = self.spec, self.result
        system = system_prompt(self.kernel, spec)
        # A repair starts from what is wrong with the file now. An invalid limit the person set
        # (and the spec does not replace) would be kept by every attempt: say so at once.
        found = self._problems(parse(self.original, str(self.path))) if self.original else []
        problems = [message for message, _ in found]
        asked = spec.asked_limits()
        if any(limit is not None and limit not in asked for _, limit in found):
            result.errors = problems
            raise _Stop("failed", "explicit_limit_invalid")
        previous: Previous | None = None
        while True:
            reason = self.allowances.exhausted(result.tokens, self.cost, result.attempts)
            if reason:
                raise _Stop("incomplete", reason)
            result.attempts += 1
            prompt = user_prompt(spec, self.original, problems, previous)
            reply = await self._ask([Message("system", system), Message("user", prompt)])
            reply_yaml = extract_yaml(reply.message.content) if reply else ""
            if reply is None:
                candidate, errors, stuck = None, [self._timeout_error()], False
            else:
                candidate, errors, stuck = self._validate(reply_yaml)
            result.candidate = candidate.text if candidate else None
            result.stripped = list(candidate.stripped) if candidate else []
            result.checks, result.errors = [], errors
            if candidate is not None and not errors and scratch is not None:
                errors = await self._run_checks(candidate, scratch)
            result.errors = errors
            await self._emit_attempt()
            if candidate is not None and not errors:
                await self._save(candidate, reply_yaml)
                return
            if stuck:  # every problem is a limit the person set: no attempt can change it
                raise _Stop("failed", "explicit_limit_invalid")
            previous = Previous(result.attempts, result.candidate or reply_yaml, tuple(errors))

    async def _ask(self, messages: list[Message]) -> ModelReply | None:
        """One model call, accounted; None when it outlasted ``runtime.timeouts.llm``."""
        request = ModelRequest(messages, model=self.model, max_output_tokens=self._allowance())
        with trio.move_on_after(self._llm_timeout()) as scope:
            try:
                reply = await self.provider.complete(request)
            except ProviderError as exc:
                self.result.errors = [str(exc)]
                raise _Stop("failed", "provider_error") from None
        if scope.cancelled_caught:
            return None
        price = self.kernel.hook.soulacy_price(
            kernel=self.kernel, provider=self.provider_name, model=self.model, usage=reply.usage
        )
        self._account(reply.usage, price)
        return reply

    def _account(self, usage: Usage, cost: float | None) -> None:
        self.result.input_tokens += usage.input_tokens
        self.result.output_tokens += usage.output_tokens
        if cost is None:
            self.unpriced = self.unpriced or usage.total > 0
            return
        self.cost += float(cost)
        self.result.cost_usd = self.cost

    def _validate(self, reply_yaml: str) -> tuple[Candidate | None, list[str], bool]:
        """The candidate file and its problems; ``stuck`` when all of them are about limits,
        which the build never changes (the candidate's limits are all the person's)."""
        if not reply_yaml.strip():
            return None, ["the reply held no YAML: reply with the file in a ```yaml block"], False
        try:
            candidate = compose(reply_yaml, self.original or "", self.spec, self.path)
        except ConfigError as exc:
            return None, [self._said(str(issue)) for issue in exc.issues], False
        problems = self._problems(candidate.doc)
        stuck = bool(problems) and all(limit is not None for _, limit in problems)
        return candidate, [message for message, _ in problems], stuck

    def _problems(self, doc: Any) -> list[tuple[str, tuple[str, ...] | None]]:
        """What loading ``doc`` as the agent reports (unknown tools included), each problem
        with the limit path it is about, if any."""
        try:
            agent = self.kernel.check_agent(self.spec.id, doc, self.path)
            self.kernel.runner().tools_for(agent)
            providers = self.kernel.providers
            providers.config(providers.model_of(agent)[0])  # a made-up provider
        except ConfigError as exc:
            return [(self._said(str(issue)), _limit_of(issue.path)) for issue in exc.issues]
        except SoulacyError as exc:  # an unknown tool or provider, a missing tool file
            return [(self._said(str(exc)), None)]
        return []

    async def _run_checks(self, candidate: Candidate, scratch: Path) -> list[str]:
        results: list[CheckResult] = []
        async with candidate_kernel(self.kernel, scratch, self.spec.id, candidate.text) as runner:
            for index, check in enumerate(self.spec.checks):
                reason = self.allowances.exhausted(self.result.tokens, self.cost)
                if reason:
                    raise _Stop("incomplete", reason)
                session = f"studio-{self.result.build_id}-{self.result.attempts}-{index + 1}"
                outcome = await run_check(runner, self.spec.id, check, index, session)
                self._account(Usage(outcome.input_tokens, outcome.output_tokens), outcome.cost_usd)
                results.append(outcome)
                self.result.checks.append(outcome.to_dict())
        return [f"{r.name}: {failure}" for r in results for failure in r.failures]

    async def _save(self, candidate: Candidate, reply_yaml: str) -> None:
        """Write the file; if it changed on disk during the build, merge into what it says now
        (the person's new explicit values win) and validate again before writing."""
        result, current = self.result, _read(self.path)
        if current != self.original:
            try:
                candidate = compose(reply_yaml, current or "", self.spec, self.path)
            except ConfigError as exc:  # the person's new version is not valid YAML
                result.errors = [self._said(str(issue)) for issue in exc.issues]
                raise _Stop("failed", "agent_file_changed") from None
            errors = [message for message, _ in self._problems(candidate.doc)]
            if errors:
                result.errors = errors
                raise _Stop("failed", "agent_file_changed")
            result.warnings.append(
                f"{self.path} changed during the build; the result was merged into it"
            )
            result.candidate = candidate.text
        if current != candidate.text:
            atomic_write(self.path, candidate.text)
            result.changed = True
        result.status, result.reason, result.path = "completed", None, self.path

    async def _emit_attempt(self) -> None:
        r = self.result
        await self.kernel.events.emit(
            "studio.attempt",
            {
                "agent_id": r.agent_id,
                "attempt": r.attempts,
                "errors": list(r.errors),
                "checks": list(r.checks),
                "stripped": list(r.stripped),
                "tokens": r.tokens,
                "cost_usd": r.cost_usd,
            },
            run_id=r.build_id,
        )

    def _said(self, text: str) -> str:
        """An error as the model should read it: about SOUL.yaml, not a path on this machine."""
        return text.replace(str(self.path), AGENT_FILE)

    def _allowance(self) -> int | None:
        """The workspace's per-response output allowance, capped as for runs."""
        allowance = _config(self.kernel, "costs.default_max_output_tokens") or None
        ceiling = _config(self.kernel, "costs.max_output_tokens_ceiling")
        if ceiling and (allowance is None or allowance > ceiling):
            allowance = ceiling
        capacity = self.kernel.hook.soulacy_model_capacity(
            kernel=self.kernel, provider=self.provider_name, model=self.model
        )
        most = getattr(capacity, "max_output_tokens", None)
        if most and (allowance is None or allowance > most):
            allowance = most
        return allowance

    def _llm_timeout(self) -> float:
        timeout = _config(self.kernel, "runtime.timeouts.llm")
        seconds = getattr(timeout, "seconds", 0)
        return float(seconds) if seconds else math.inf

    def _timeout_error(self) -> str:
        return f"the model did not answer within {_config(self.kernel, 'runtime.timeouts.llm')}"


def _builder_model(kernel: Kernel, spec: BuildSpec) -> tuple[str, str | None]:
    default = kernel.config.values.get("llm.default")  # None when no plugin declares it
    name = spec.model.provider or getattr(default, "provider", None)
    if not name:
        raise UsageError(
            "no model to build with: set model.provider in the build spec or"
            f" llm.default.provider in {kernel.config_file}"
        )
    default_model = getattr(default, "model", None)
    return name, spec.model.model or kernel.providers.config(name).model or default_model


def _config(kernel: Kernel, path: str) -> Any:
    """A workspace value owned by another plugin, None when no loaded plugin owns it."""
    try:
        return kernel.config.get(path)
    except KeyError:
        return None


def _limit_of(issue_path: str) -> tuple[str, ...] | None:
    """The limit path an issue is about (``budget.max_tokens`` is about ``budget``), if any."""
    parts = tuple(issue_path.split("."))
    return next((p for p in LIMIT_PATHS if parts[: len(p)] == p), None)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
