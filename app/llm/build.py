"""The model chain as configured: each model on its path, in order.

`hermes/local` answers in-process; OpenAI-compatible models go through the direct client, one
HTTP client per server shared by the models behind it; the rest through LiteLLM, which is
imported here only when such a model is configured (see `app.llm.catalog` for the rule).
Every model but `hermes/local` is behind the masking policy, when one is active
(`app.llm.masked`): their requests leave the process.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.llm.catalog import Direct, Local, ModelApi, ModelConfig, ViaLiteLLM, routes
from app.llm.chain import ChainLink, ModelChain
from app.llm.clients import ModelClients
from app.llm.gateway import ChatModel
from app.llm.local.model import LocalModel, LocalModelConfig
from app.llm.masked import MaskedModel
from app.llm.masking import Redact
from app.llm.openai_compat import OpenAICompatModel
from app.llm.pseudonyms import MaskingPolicy
from app.llm.retry import RetryPolicy
from app.nlu.types import Parser
from app.resilience.breaker import BreakerFactory, BreakerPolicy
from app.settings import Settings


@dataclass(frozen=True)
class ChainOptions:
    api: ModelApi
    timeout_s: float
    max_connections: int  # per model server
    retry: RetryPolicy
    breaker: BreakerPolicy
    local: LocalModelConfig
    breakers: BreakerFactory | None = None  # where breaker state lives; None: in this process
    # What remote models may see of phones, emails, ID and bank cards; None: everything.
    masking: MaskingPolicy | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, breakers: BreakerFactory | None = None
    ) -> ChainOptions:
        model = settings.model
        return cls(
            api=model.api,
            timeout_s=model.timeout_s,
            max_connections=model.max_connections,
            retry=RetryPolicy.from_settings(model),
            breaker=BreakerPolicy.from_settings(model),
            local=LocalModelConfig.from_settings(settings.nlu),
            breakers=breakers,
            masking=MaskingPolicy.from_settings(settings),
        )


def build_chain(
    configs: list[ModelConfig],
    options: ChainOptions,
    *,
    parser: Parser | None = None,
    redact: Redact | None = None,
) -> ModelChain:
    """A chain over `configs` in order; `parser` serves `hermes/local` when it is among them."""
    if not configs:
        raise ValueError("a model chain needs at least one model")
    found = routes(configs[0], configs[1:], options.api)
    clients = ModelClients(max_connections=options.max_connections, timeout_s=options.timeout_s)
    links = []
    for config, path in zip(configs, found, strict=True):
        model: ChatModel
        match path:
            case Local():
                if parser is None:
                    raise ValueError("hermes/local needs an NLU parser")
                model = LocalModel(parser, options.local)
            case Direct():
                model = OpenAICompatModel(config.model, path, clients, extra=config.extra)
            case ViaLiteLLM():
                from app.llm.litellm_gateway import LiteLLMModel

                model = LiteLLMModel(config, timeout_s=options.timeout_s)
        if not isinstance(path, Local) and options.masking is not None and options.masking.active:
            model = MaskedModel(model, options.masking)
        links.append(ChainLink(config.model, model))
    return ModelChain(
        links,
        retry=options.retry,
        breaker=options.breaker,
        timeout_s=options.timeout_s,
        redact=redact,
        breakers=options.breakers,
    )
