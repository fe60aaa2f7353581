"""`POST /v1/nlu/parse`: intent and slots for one utterance."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.deps import ParserDep, PrincipalDep
from app.api.schemas import ErrorResponse
from app.nlu.types import ParseResult

router = APIRouter(prefix="/v1/nlu", tags=["nlu"])


class ParseRequest(BaseModel):
    text: str = Field(min_length=1, max_length=2000)


class IntentScoreOut(BaseModel):
    intent: str
    confidence: float


class SlotOut(BaseModel):
    name: str
    value: str
    start: int
    end: int


class ParseResponse(BaseModel):
    intent: str
    confidence: float
    ranking: list[IntentScoreOut]
    slots: list[SlotOut]
    language: str

    @classmethod
    def of(cls, result: ParseResult) -> ParseResponse:
        return cls.model_validate(result.to_dict())


ERRORS: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorResponse, "description": "The NLU models are not loaded"}
}


@router.post("/parse", response_model=ParseResponse, responses=ERRORS)
async def parse(body: ParseRequest, _principal: PrincipalDep, parser: ParserDep) -> ParseResponse:
    # A parse takes well under a millisecond of CPU: running it inline is cheaper than a
    # hop to the thread pool.
    return ParseResponse.of(parser.parse(body.text))
