"""The offline model's dialogue policy: a pure function of the conversation.

`DialoguePolicy.decide(messages, offered_tools)` reads the whole conversation each time (no
state is kept between calls), folds the user turns into an effective intent and the slots
given so far, and returns one decision from a closed set. See docs/offline-model.md for the
decision table.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.knowledge.passages import SEARCH_TOOL
from app.llm.local import templates as t
from app.llm.local.conversation import (
    Conversation,
    Exchange,
    Outcome,
    UserTurn,
    call_key,
    earlier_results,
    read,
)
from app.llm.local.intents import (
    FREE_TEXT,
    INTENT_OF_TOOL,
    TOOL_INTENTS,
    Call,
    Memory,
    Need,
    answers,
    asked_slot,
    plan,
)
from app.llm.local.knowledge import (
    accepts_offer,
    asks,
    follows_up,
    knowledge_answer,
    last_topic,
    policy_query,
    says_yes,
    searched,
)
from app.llm.local.mail import latest_facts, plan_email
from app.llm.local.memory import (
    memory_reply,
    preference_reply,
    recalled_note_reply,
    recalled_preferences,
)
from app.llm.local.replies import filed_refund_reply, result_reply
from app.llm.local.templates import Lang
from app.nlu.types import Parser, ParseResult, Slot
from app.settings import NluSettings
from app.text.language import latest_language

LOW_CONFIDENCE = "low_confidence"
# A question about a rule: answered by `knowledge_answer`, never planned into a tool call.
POLICY_QUESTION = "policy_question"
# Requests that, put as a question about no order, ask about their rule.
_ASKED_RULES = frozenset({"return_request", "refund_request"})
_HANDOFF_INTENTS = frozenset({"human_handoff", "out_of_scope", LOW_CONFIDENCE})

# Words that may surround a bare slot answer ("订单号是 202405201234", "it's SF123456789CN",
# "发到 a@b.com 吧", "to a@b.com please": an address answering "which address?" is not a
# request to change the account's email).
_FILLER = re.compile(
    r"订单编号|订单号|订单|快递单号|物流单号|运单号|单号|手机号码|手机号|电话|号码|邮箱地址|邮箱|"
    r"发送到|发送至|发到|发至|发给|寄到|地址|是|我的|嗯|好的|哦|吧|就行|谢谢|"
    r"\b(?:order|number|no|id|tracking|phone|mobile|email|address|my|it|its|it's|is|the|sure|"
    r"ok|okay|yes|here|please|thanks|thank|you|send|to|at|use)\b",
    re.I,
)
_NOT_WORD = re.compile(r"[\W_]+")
# A bare number answering "how much should be refunded?" ("948", "¥1786.50"): the tagger only
# tags amounts with a unit or a verb around them, but a lone number there can only be the amount.
_BARE_AMOUNT = re.compile(r"^\s*[¥￥$]?\s*(\d{1,7}(?:\.\d{1,2})?)\s*[。.!！]?\s*$")
# A number right after "refund"/"退款" or before "refunded" ("refund 100 on order …",
# "订单…退款100", "I want 948 refunded"): the tagger misses amounts without a unit, and
# refunding the whole order instead would be a write nobody asked for.
_REFUND_AMOUNT = re.compile(
    r"(?:refund(?:\s+(?:of|me))?|退款|退还|退)\s*[¥￥$]?\s*(\d{1,7}(?:\.\d{1,2})?)(?![\d.])|"
    r"(?<![\d.])(\d{1,7}(?:\.\d{1,2})?)\s*(?:refunded|back\b)",
    re.I,
)

# Words that make a message a complaint when the classifier is unsure: "我要投诉，订单…显示已经签收
# 了，可我根本没收到" reads as an order-status question at 0.48; the customer said what they want.
_COMPLAINT_WORD = re.compile(r"投诉|\bcomplain(?:t|ts|ing|ed)?\b", re.I)
# An answer to "please describe what happened" switches to another request only when it is
# clearly one ("Before that, what's the status of order …?" reads at 0.98); a story about the
# courier reads as a tracking question at 0.74 and is the complaint's details.
_CLEAR_REQUEST = 0.9
# An amount beside a refund word ("退50块", "another 250 CNY back"): when the classifier is
# unsure (refund against order status or tracking, both below the threshold), the amount and
# the word together say it is a refund. Not "退货" (a return): 退 counts only before a number.
_REFUND_WORD = re.compile(r"退款|退钱|退还|退\s*[¥￥$]?\s*\d|refund|money back|\bback\b", re.I)


@dataclass(frozen=True)
class AskForSlot:
    text: str
    intent: str
    slot: str


@dataclass(frozen=True)
class CallTool:
    name: str
    arguments: dict[str, Any]
    intent: str


@dataclass(frozen=True)
class Reply:
    text: str
    intent: str


@dataclass(frozen=True)
class Handoff:
    text: str
    reason: str  # human_handoff | out_of_scope | low_confidence | tool_not_offered


Decision = AskForSlot | CallTool | Reply | Handoff


@dataclass
class Understanding:
    """The conversation folded up to its last user message."""

    intent: str = "greeting"
    continued: bool = False  # the last message answered a question for the previous intent
    memory: Memory = field(default_factory=Memory)
    language: Lang = "en"
    # A question put to the documents only because the classifier could not place it: if
    # they do not recognise it either, it is answered as any message we cannot place.
    unsure: bool = False


class DialoguePolicy:
    def __init__(
        self, parser: Parser, min_confidence: float = NluSettings().min_confidence
    ) -> None:
        self.parser = parser
        self.min_confidence = min_confidence

    def decide(self, messages: Sequence[Mapping[str, Any]], offered: Collection[str]) -> Decision:
        transcript = read(messages)
        if not transcript.user_turns:
            return Reply(t.GREETING["en"], "greeting")
        u = self.understand(transcript.user_turns)
        lang = u.language
        if not transcript.exchanges:  # "记住…" / "忘掉这个": the service did it; say so
            text, requested = transcript.user_turns[-1].text, self._tool_request(transcript)
            said = memory_reply(text, requested, messages, lang)
            said = said or recalled_note_reply(text, requested, messages, lang)
            if said is not None:
                return Reply(said, "memory")
        if u.intent == POLICY_QUESTION:  # before any plan: a question never writes
            topic = last_topic(earlier_results(messages, SEARCH_TOOL)) if u.continued else None
            question = policy_query(transcript.user_turns, u.continued, topic)
            found = searched(transcript.exchanges)
            if found is None and SEARCH_TOOL in offered:
                return CallTool(SEARCH_TOOL, {"query": question, "language": lang}, POLICY_QUESTION)
            if u.unsure and not (found or {}).get("passages"):
                return Handoff(t.HANDOFF[LOW_CONFIDENCE][lang], LOW_CONFIDENCE)
            focus = transcript.user_turns[-1].text if u.continued else None
            return Reply(knowledge_answer(question, lang, found, focus), POLICY_QUESTION)
        preferences = recalled_preferences(messages)
        made: dict[tuple[str, str], Exchange] = {}
        for exchange in transcript.exchanges:
            key = exchange.key()
            kept = made.get(key) if key else None
            if key and (kept is None or (kept.outcome is None and exchange.outcome is not None)):
                made[key] = exchange  # an answered call wins over an unanswered repeat of it
        last = transcript.last_result() if transcript.last_is_tool else None
        if last is not None and transcript.user_turns[-1].after.startswith(t.READBACK_OPENINGS):
            # "是的" / "确认" to a read-back: the runtime ran the confirmed call; answer from it,
            # whatever "确认" alone would read as.
            return self._from_result(last, lang, preferences)

        def done(name: str, arguments: dict[str, Any]) -> Outcome | None:
            exchange = made.get(call_key(name, arguments))
            return exchange.outcome if exchange else None

        step: Need | Call | None = None
        if u.intent == "email_request":
            step = plan_email(u.memory, done, latest_facts(messages), lang, offered)
        elif u.intent in TOOL_INTENTS:
            step = plan(u.intent, u.memory, done)
        if isinstance(step, Call):
            already = made.get(call_key(step.name, step.arguments))
            if already is not None:  # never the same call twice in one turn: answer instead
                return self._from_result(already, lang, preferences)
            filed = _filed_refund(messages, step) if u.intent == "refund_request" else None
            if filed is not None:  # "我的退款怎么样了": a question about it, not a second refund
                return Reply(filed_refund_reply(filed, lang), u.intent)
            if step.name in offered:
                return CallTool(step.name, step.arguments, u.intent)
            if last is None:
                return Handoff(t.HANDOFF["tool_not_offered"][lang], "tool_not_offered")
        if last is not None:
            return self._from_result(last, lang, preferences)
        if isinstance(step, Need):
            return AskForSlot(t.ASK[u.intent][step.slot][lang], u.intent, step.slot)
        if u.intent in _HANDOFF_INTENTS - {"human_handoff"}:
            noted = preference_reply(transcript.user_turns[-1].text, lang)
            if noted is not None:  # "以后都用简体中文跟我沟通": stored by the service; say so
                return Reply(noted, "memory")
        if u.intent in _HANDOFF_INTENTS:
            return Handoff(t.HANDOFF[u.intent][lang], u.intent)
        if u.intent == "goodbye":
            return Reply(t.GOODBYE[lang], "goodbye")
        if u.intent == "greeting":
            return Reply(t.GREETING[lang], "greeting")
        return Handoff(t.HANDOFF["out_of_scope"][lang], "out_of_scope")  # an unknown label

    def understand_messages(self, messages: Sequence[Mapping[str, Any]]) -> Understanding:
        """The effective intent of a conversation's last user message, with continuation
        applied: what tool narrowing should use (a bare "202405201235" after "which order
        should be refunded?" is a refund, though alone it reads as an order-status question)."""
        return self.understand(read(messages).user_turns)

    def understand(self, turns: list[UserTurn]) -> Understanding:
        u = Understanding()
        active: str | None = None  # the tool intent the conversation is currently serving
        residuals: list[str] = []
        for index, turn in enumerate(turns):
            parse = self.parser.parse(turn.text)
            slots = {s.name: s.value for s in parse.slots}
            residual = _without_slots(turn.text, parse.slots)
            residuals.append(residual)
            asked = asked_slot(turn.after) if active else None
            if asked == "amount" and "amount" not in slots:
                bare = _BARE_AMOUNT.match(turn.text)
                if bare:
                    slots["amount"] = bare.group(1)
                    residual = ""
            if active and asked and self._continues(active, asked, parse, slots, residual):
                u.intent, u.continued = active, True
                if asked in FREE_TEXT:
                    u.memory.answers[asked] = turn.text
            elif active and turn.after.startswith(t.READBACK_OPENINGS) and says_yes(turn.text):
                # "是的" to the read-back of the active request's call: the runtime runs it, and
                # this turn is still that request (its recall, its tools, its reply).
                u.intent, u.continued = active, True
            elif (
                u.intent == POLICY_QUESTION
                and "order_id" not in slots
                and (follows_up(turn.text) or self._unsure_question(parse))
            ):
                # "and for damaged items?" / "那质量问题呢": the same question, on a new case;
                # so is what the classifier leans to read as a question without being sure,
                # right after an answer ("I paid by credit card"); "那就把订单…退货吧" names
                # an order: a request, read as one
                u.intent, u.continued = POLICY_QUESTION, True
            elif accepts_offer(turn):  # "好的" to "shall I get a colleague?": a handoff
                u.memory.new_thread()
                u.memory.new_request()
                u.intent, u.continued = "human_handoff", True
            else:
                confident = parse.confidence >= self.min_confidence
                intent = parse.intent if confident else LOW_CONFIDENCE
                unsure = False
                if not confident and _COMPLAINT_WORD.search(turn.text):
                    # A long complaint with order details reads as anything; a complaint about
                    # a refund ("the refund took weeks") is not a request to refund again.
                    intent = "complaint"
                elif (
                    intent == "complaint"
                    and asks(turn.text)
                    and not _COMPLAINT_WORD.search(turn.text)
                ):
                    # A question is answered, never filed: "Is anybody picking up the phone at
                    # the weekend?" reads as a complaint, and a ticket is a write nobody asked
                    # for. One that says it is a complaint ("我要投诉…吗") still is one.
                    intent = POLICY_QUESTION
                elif not confident and _unsure_refund(parse, slots, turn.text):
                    intent = "refund_request"
                elif not confident and asks(turn.text) and "order_id" not in slots:
                    # A question the classifier cannot place ("Will you send a replacement for
                    # a broken item, and how quickly?") is put to the documents: they answer
                    # it, or (`unsure`) it is answered as any message we cannot place. About
                    # an order, it is not a question about the rules.
                    intent, unsure = POLICY_QUESTION, True
                elif intent in _ASKED_RULES and asks(turn.text) and "order_id" not in slots:
                    # "Can I return an item I no longer want?", "How do I get a refund?": asked
                    # about no order, it is a question about the rule, answered from the
                    # documents; naming an order ("Can I return 202405201234?") is a request.
                    intent = POLICY_QUESTION
                if intent != active:
                    u.memory.new_thread()
                u.memory.new_request()
                u.intent, u.continued, u.unsure = intent, False, unsure
            if u.intent == "refund_request" and "amount" not in slots:
                said = _REFUND_AMOUNT.search(residual)
                if said:
                    slots["amount"] = said.group(1) or said.group(2)
            u.memory.add(slots, index, turn.text)
            active = u.intent if u.intent in TOOL_INTENTS else None
        u.language = latest_language(reversed(residuals))
        return u

    def _unsure_question(self, parse: ParseResult) -> bool:
        return parse.intent == POLICY_QUESTION and parse.confidence < self.min_confidence

    def _continues(
        self, active: str, asked: str, parse: ParseResult, slots: dict[str, str], residual: str
    ) -> bool:
        """Whether a message answers the previous question instead of starting something new."""
        if not answers(asked, slots, parse.text):
            return False
        if asked not in FREE_TEXT and _is_bare(residual):
            return True
        if parse.confidence < self.min_confidence:
            return True
        if asked == "tracking_or_order" and parse.intent == "order_status" and "order_id" in slots:
            # "那用订单号查吧，202405201234" after an unknown tracking number: the order number
            # answers the tracking question (the order is read, then its parcel tracked).
            return True
        if asked == "summary" and parse.confidence < _CLEAR_REQUEST:
            return True  # what happened, told as a story, reads as tracking or order questions
        # A question about a rule never answers a tool's question ("how long does a refund
        # take for order 202405201235?" after "which order?"): it is asked, not a request.
        switches = (TOOL_INTENTS - {active}) | {"human_handoff", "goodbye", POLICY_QUESTION}
        return parse.intent not in switches

    def _tool_request(self, transcript: Conversation) -> bool:
        """Whether the last message is a confident tool request that carries its details."""
        parse = self.parser.parse(transcript.user_turns[-1].text)
        confident = parse.confidence >= self.min_confidence
        return confident and parse.intent in TOOL_INTENTS and bool(parse.slots)

    @staticmethod
    def _from_result(exchange: Exchange, lang: Lang, preferences: dict[str, str]) -> Reply:
        intent = INTENT_OF_TOOL.get(exchange.name, "")
        text = result_reply(intent, exchange, lang)
        courier = preferences.get("preference.courier")
        ok = exchange.outcome is not None and exchange.outcome.status == "success"
        if intent == "return_request" and ok and courier:
            text += ("" if lang == "zh" else " ") + t.COURIER_FOR_RETURN[lang].format(
                courier=t.courier_name(courier, lang)
            )
        return Reply(text, intent)


def _filed_refund(messages: Sequence[Mapping[str, Any]], step: Call) -> Exchange | None:
    """The refund an earlier turn filed for the order `step` would refund again (without a new
    amount): asking about a refund must not file a second one."""
    if step.name != "request_refund" or "amount" in step.arguments:
        return None
    order_id = step.arguments.get("order_id")
    filed = [
        e
        for e in earlier_results(messages, "request_refund")
        if (e.arguments or {}).get("order_id") == order_id
    ]
    return filed[-1] if filed else None


def _unsure_refund(parse: ParseResult, slots: Mapping[str, str], text: str) -> bool:
    """An unconfident parse that still ranks refund, with an amount and a refund word."""
    ranked = any(score.intent == "refund_request" for score in parse.ranking)
    return ranked and "amount" in slots and _REFUND_WORD.search(text) is not None


def _without_slots(text: str, slots: list[Slot]) -> str:
    out = text
    for slot in sorted(slots, key=lambda s: s.start, reverse=True):
        if 0 <= slot.start < slot.end <= len(out):
            out = out[: slot.start] + " " + out[slot.end :]
    return out


def _is_bare(residual: str) -> bool:
    return not _NOT_WORD.sub("", _FILLER.sub(" ", residual))
