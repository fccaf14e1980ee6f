"""Key check: `GET /v1/auth/verify` answers 200 for a known key and 401 for any other (the product's route,
which the SimLab CLI calls from `simlab auth login` before it saves a key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from eval_pipelines.schemas.service_wire import AuthVerification
from eval_pipelines.service.auth import Permission
from eval_pipelines.service.state import authenticate

router = APIRouter()


@router.get("/auth/verify", response_model=AuthVerification, tags=["auth"], summary="Check an API key")
def verify_key(permission: Annotated[Permission, Depends(authenticate)]) -> AuthVerification:
    return AuthVerification(permission=permission.value)
