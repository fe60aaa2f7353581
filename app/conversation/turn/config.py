"""What the turn's stages are configured with, built from the settings (`from_settings`)."""

from __future__ import annotations

from dataclasses import dataclass

from app.settings import Settings


@dataclass(frozen=True)
class TurnConfig:
    system_prompt: str
    max_messages: int
    step_queue_max_depth: int
    context_cache_sessions: int
    context_cache_messages: int
    delta_flush_s: float
    ask_user_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> TurnConfig:
        return cls(
            system_prompt=settings.model.system_prompt,
            max_messages=settings.context.max_messages,
            step_queue_max_depth=settings.workflow.step_queue_max_depth,
            context_cache_sessions=settings.context.cache_sessions,
            context_cache_messages=settings.context.cache_messages,
            delta_flush_s=settings.turns.delta_flush_ms / 1000,
            ask_user_timeout_s=settings.workflow.ask_user_timeout_s,
        )
