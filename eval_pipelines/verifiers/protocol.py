"""The verifier protocol: `verify(run_artifacts)` returns VerifierResult, `(bool, str)` or `bool`.

A verifier is called as SimLab calls it, `verify(run_artifacts=...)`, when its signature takes that keyword, else
positionally (`def verify(artifacts)`, the built-in scenarios' style). What it returns is read as a verdict in
the shapes of `is_verdict`; anything else is a `verifier` error for the project's own verifiers (a grader that
returns something else is broken, and its truthiness says nothing of the agent), while a SimLab task's verifiers
get SimLab's reading of it (`simlab_result`), so a bundle grades here as it grades under SimLab.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.verifiers import VerifierKind, VerifierOutcome, VerifierResult
from eval_pipelines.verifiers import reach
from eval_pipelines.verifiers.simlab_view import ServerStateUnavailable, SimLabRunArtifacts, verifier_view

#: `verify(run_artifacts)`, called positionally or by the keyword `run_artifacts` (see `takes_run_artifacts_keyword`)
VerifyFn = Callable[..., Any]


def is_verdict(raw: Any) -> bool:
    """Whether a verifier's return value is one of the shapes `normalise_result` reads as a verdict."""
    if isinstance(raw, VerifierResult | bool):
        return True
    if isinstance(raw, tuple):
        return bool(raw) and isinstance(raw[0], bool)
    if isinstance(raw, dict):
        return isinstance(raw.get("success"), bool)
    return isinstance(getattr(raw, "success", None), bool)


def normalise_result(raw: Any) -> VerifierResult:
    """Turn whatever a verifier returned into a VerifierResult; anything unrecognisable is a failure."""
    if isinstance(raw, VerifierResult):
        return raw
    if isinstance(raw, bool):
        return VerifierResult(success=raw)
    if isinstance(raw, tuple) and raw and isinstance(raw[0], bool):
        message = str(raw[1]) if len(raw) > 1 else ""
        output = raw[2] if len(raw) > 2 else ""
        return VerifierResult(success=raw[0], message=message, output=output)
    if isinstance(raw, dict) and isinstance(raw.get("success"), bool):
        return VerifierResult.model_validate(raw)
    # Duck-typed results from bundles that define their own VerifierResult class.
    success = getattr(raw, "success", None)
    if isinstance(success, bool):
        return VerifierResult(
            success=success, message=str(getattr(raw, "message", "") or ""), output=getattr(raw, "output", "")
        )
    return VerifierResult(success=False, message=f"Verifier returned an unsupported value: {type(raw).__name__}")


def simlab_result(raw: Any) -> VerifierResult:
    """A SimLab verifier's return value read as SimLab's `_coerce_verifier_result` reads it: a verdict shape as
    `normalise_result` reads it; an object with `success` and `message` by the truth of `success`; a pair as
    (success, message); anything else by its truth, with its text as the message. SimLab reads a dict or a longer
    tuple by its truth too, so `{"success": False}` passes there; here an explicit verdict is read as one."""
    if is_verdict(raw):
        return normalise_result(raw)
    if hasattr(raw, "success") and hasattr(raw, "message"):
        return VerifierResult(
            success=bool(raw.success), message=str(raw.message or ""), output=getattr(raw, "output", "") or ""
        )
    if isinstance(raw, tuple) and len(raw) == 2:
        return VerifierResult(success=bool(raw[0]), message=str(raw[1]))
    return VerifierResult(success=bool(raw), message=str(raw))


def takes_run_artifacts_keyword(verify: VerifyFn) -> bool:
    """Whether `verify(run_artifacts=...)` is a call `verify` accepts (SimLab's call); else it is called
    positionally."""
    try:
        # The callable's own parameters: a wrapper made with functools.wraps is called as itself, not as what it wraps.
        inspect.signature(verify, follow_wrapped=False).bind(run_artifacts=None)
    except (TypeError, ValueError):  # no such keyword, another parameter required, or no signature to read
        return False
    return True


def _call(verify: VerifyFn, view: Any) -> Any:
    return verify(run_artifacts=view) if takes_run_artifacts_keyword(verify) else verify(view)


def run_verifier(
    module: str,
    verifier_version: str,
    verify: VerifyFn | None,
    artifacts: RunArtifacts,
    kind: VerifierKind = VerifierKind.PROGRAMMATIC,
) -> VerifierOutcome:
    """Run one verifier; a missing `verify`, an exception or a failure that came from what the verifier could not
    reach is an outcome without a verdict (`is_error`), never a crash."""
    error: str | None = None
    if verify is None:
        error = f"Verifier error: module {module!r} defines no verify()"
    else:
        reach.begin()
        view = verifier_view(artifacts)
        simlab = isinstance(view, SimLabRunArtifacts)
        try:
            raw = _call(verify, view)
            if simlab or is_verdict(raw):
                result = simlab_result(raw) if simlab else normalise_result(raw)
                error = None if result.success else _failure_without_verdict(view, result)
            else:
                error = f"Verifier error: returned an unsupported value: {type(raw).__name__}"
        except ServerStateUnavailable as exc:
            error = f"Verifier error: {exc}"
        except SystemExit as exc:  # sys.exit() in a verifier costs its verdict, not a dead run or worker
            error = f"Verifier error: called sys.exit({exc.code!r})"
        except Exception as exc:
            error = f"Verifier error: {type(exc).__name__}: {exc}"
        finally:
            if isinstance(view, SimLabRunArtifacts):
                view.close()
    if error is not None:
        return VerifierOutcome(
            module=module,
            verifier_version=verifier_version,
            kind=kind,
            success=False,
            reward=0.0,
            message=error,
            is_error=True,
        )
    reward = result.reward if result.reward is not None else (1.0 if result.success else 0.0)
    return VerifierOutcome(
        module=module,
        verifier_version=verifier_version,
        kind=kind,
        success=result.success,
        reward=reward,
        message=result.message,
        output=result.output,
    )


def _failure_without_verdict(view: Any, result: VerifierResult) -> str | None:
    """Why a failing verdict says nothing of the agent, or None: the verifier asked for a server the rollout does
    not have, or could not reach one (it caught that itself and reported a failure)."""
    missing = view.servers_not_found if isinstance(view, SimLabRunArtifacts) else []
    if missing:
        names = ", ".join(repr(name) for name in dict.fromkeys(missing))
        return f"Verifier error: it asked for tool server {names}, which this rollout does not have ({result.message})"
    unreached = reach.misses()
    if unreached:
        return f"Verifier error: it could not reach {'; '.join(unreached[:3])} ({result.message})"
    return None


def combine(outcomes: Sequence[VerifierOutcome]) -> tuple[bool, float, float, str]:
    """(success, reward, partial_credit, message): reward is 1.0 only when every verifier passes."""
    if not outcomes:
        return False, 0.0, 0.0, "no verifiers configured"
    passed = sum(1 for o in outcomes if o.success)
    success = passed == len(outcomes)
    messages = "; ".join(f"{o.module}: {o.message}" for o in outcomes if o.message)
    return success, 1.0 if success else 0.0, passed / len(outcomes), messages


class VerifierSource(Protocol):
    """Anything that resolves a module name to its loaded verifier (a VerifierPackage)."""

    def get(self, module: str) -> Any: ...


def verify_task(
    source: VerifierSource | None, modules: Sequence[str], artifacts: RunArtifacts
) -> list[VerifierOutcome]:
    """Run a task's verifiers over one rollout's artifacts, in declaration order."""
    return [verify_module(source, module, artifacts) for module in modules]


def verify_module(source: VerifierSource | None, module: str, artifacts: RunArtifacts) -> VerifierOutcome:
    """Run one of a task's verifiers; an unknown source, a failed import or a raise is a failed outcome."""
    if source is None:
        return run_verifier(module, "missing", None, artifacts)
    loaded = source.get(module)
    outcome = run_verifier(module, loaded.version, loaded.verify, artifacts)
    if loaded.verify is None and getattr(loaded, "load_error", None):
        outcome = outcome.model_copy(update={"message": f"Verifier error: {loaded.load_error}"})
    return outcome
