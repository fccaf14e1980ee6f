"""What one app instance of the platform owns (store, model router, settings, token check), and how a route
gets it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

from fastapi import HTTPException, Request, UploadFile
from starlette.concurrency import run_in_threadpool

from eval_pipelines.llm.errors import LLMError
from eval_pipelines.platform.auth import Principal
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.judges import Verdict, VerdictError, run_judge
from eval_pipelines.platform.models import ModelRouter, ModelUnavailable
from eval_pipelines.platform.store import JudgeRecord, PlatformStore
from eval_pipelines.schemas.platform import ConversationMessage
from eval_pipelines.schemas.sweep import ModelCallLimits

#: The prefix of every route of spec 002.
API = "/api/v1"


@dataclass
class PlatformState:
    settings: PlatformSettings
    store: PlatformStore
    models: ModelRouter
    authenticate: Callable[[Request], Principal]

    async def verdict(
        self,
        judge: JudgeRecord,
        prefix: Sequence[ConversationMessage],
        response: ConversationMessage,
        where: str = "",
        calls: ModelCallLimits | None = None,
    ) -> Verdict:
        """The judge's verdict; 503 when its model is not usable, 502 when it failed."""
        subject = f"judge {judge.judge_name!r} (model {judge.model_name!r})"
        try:
            return await run_judge(self.models, judge, prefix, response, calls)
        except ModelUnavailable as exc:
            raise HTTPException(status_code=503, detail=f"{subject} is not usable: {exc}") from None
        except (LLMError, VerdictError) as exc:
            raise HTTPException(status_code=502, detail=f"{subject} failed{where}: {exc}") from None

    async def read_upload(self, file: UploadFile) -> bytes:
        limit = self.settings.max_upload_bytes
        content = await file.read(limit + 1)
        if len(content) > limit:
            raise HTTPException(status_code=413, detail=f"file is larger than {limit} bytes")
        return content

    async def find_judge(self, space: str, judge_id: UUID) -> JudgeRecord:
        judge = await run_in_threadpool(self.store.get_judge, space, str(judge_id))
        if judge is None:
            raise HTTPException(status_code=404, detail=f"judge {judge_id} not found in space {space}")
        return judge


def current_platform(request: Request) -> PlatformState:
    """The platform of the app serving `request` (a route's dependency)."""
    state = request.app.state.platform
    assert isinstance(state, PlatformState)
    return state


def current_principal(request: Request) -> Principal:
    """The request's Principal, or 401 (a route's dependency)."""
    return current_platform(request).authenticate(request)
