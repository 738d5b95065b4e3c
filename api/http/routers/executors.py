"""Executors: the builds this server hosts, for proposers filling a spec."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from api.http.auth import Caller
from api.http.deps import LedgerDep, require_roles
from api.http.errors import error_responses
from api.http.schemas.executors import ExecutorListOut
from api.service import executors

router = APIRouter(
    prefix="/executors",
    tags=["executors"],
    responses=error_responses(401, 403, 503),
)

ReaderCaller = Annotated[Caller, Depends(require_roles(*executors.READERS))]


@router.get("", response_model_exclude_none=True)
def list_executors(caller: ReaderCaller, ledger: LedgerDep) -> ExecutorListOut:
    """Every executor build this server process hosts (proposer and admin roles):
    by capability, the newest build first within one.

    ``available`` is true when the directory's executor-build record for that
    exact build says available with its delivery mode AND this process hosts
    the build, which every listed one is: what a proposal naming it needs.
    Names, digests and modes only, never an executor's configuration."""
    return executors.executor_listing(ledger, caller)
