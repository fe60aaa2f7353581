"""The simulated customer: deterministic, rule based, no model.

Each round it reads the agent's last reply, works out which slot the reply's last question
asks for (`slots.asked_slot`) and answers from the scenario's fact sheet in the scenario's
style. Reactions (corrections, a change of mind, a topic switch and its return) replace an
answer the first time their trigger occurs, in the order the scenario lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.evaluation.scenario import Simulation
from app.evaluation.slots import asked_slot, asks_for_new, phrase

# slot -> the fact-sheet keys that answer it, first present wins; (new, old) for contact slots
_FACT_KEYS: dict[str, tuple[str, ...]] = {
    "order_id": ("order_id",),
    "tracking": ("tracking_number", "order_id"),
    "amount": ("amount",),
    "summary": ("complaint",),
    "field": ("field",),
    "confirm": ("confirm",),
}
_CONTACT = {"phone": "new_phone", "email": "new_email", "address": "new_address"}


@dataclass
class SimulatedCustomer:
    plan: Simulation
    facts: dict[str, str]
    language: str
    said: list[str] = field(default_factory=list)
    _next_reaction: int = 0
    _closed: bool = False

    def first(self) -> str:
        return self._say(self.plan.opening)

    def answer(self, reply: str) -> str | None:
        """The customer's next message after the agent's `reply`, or None: the conversation is
        over (nothing asked that the fact sheet answers, the closing said, or the turn cap)."""
        if self._closed or len(self.said) >= self.plan.max_turns:
            return None
        slot = asked_slot(reply)
        value = self._value(slot, reply) if slot is not None else None
        reaction = self._reaction(slot, answerable=value is not None)
        if reaction is not None:
            return self._say(reaction)
        if value is not None and slot is not None:
            return self._say(phrase(slot, value, self.plan.style, self.language))
        if self.plan.closing is not None:
            self._closed = True
            return self._say(self.plan.closing)
        return None

    def _reaction(self, slot: str | None, *, answerable: bool) -> str | None:
        if self._next_reaction >= len(self.plan.reactions):
            return None
        reaction = self.plan.reactions[self._next_reaction]
        # `any` fires on whatever comes next; a slot when it is asked for (even if the fact
        # sheet has no answer: the reaction is the answer); `done` when nothing answerable is.
        if (
            reaction.when == "any"
            or (slot is not None and reaction.when == slot)
            or (reaction.when == "done" and not answerable)
        ):
            self._next_reaction += 1
            return reaction.say
        return None

    def _value(self, slot: str, reply: str) -> str | None:
        keys: tuple[str, ...]
        if slot in _CONTACT:
            keys = (_CONTACT[slot], slot) if asks_for_new(reply) else (slot, _CONTACT[slot])
        else:
            keys = _FACT_KEYS.get(slot, (slot,))
        if slot == "confirm":
            return self.facts.get("confirm", "yes")
        return next((self.facts[k] for k in keys if k in self.facts), None)

    def _say(self, text: str) -> str:
        self.said.append(text)
        return text
