"""Play one scenario through a `ServiceClient`: its sessions in order, scripted turns or the
simulated customer, approvals decided as the scenario says, memories read at each end."""

from __future__ import annotations

from app.evaluation.checks import Played, SessionRecord
from app.evaluation.client import Decide, ServiceClient, TurnRecord
from app.evaluation.scenario import Decision, Scenario, Session
from app.evaluation.simulator import SimulatedCustomer


def _decider(*levels: Decision | None) -> Decide:
    decision = next((d for d in levels if d is not None), None)
    return lambda _tool: decision


async def play(scenario: Scenario, client: ServiceClient) -> Played:
    played = Played()
    for seed in scenario.setup_memories:
        await client.seed_memory(scenario.customer, seed)
    for session in scenario.sessions:
        played.sessions.append(await _session(scenario, session, client))
    return played


async def _session(scenario: Scenario, session: Session, client: ServiceClient) -> SessionRecord:
    record = SessionRecord()
    for document in session.documents:
        await client.add_document(document)
    session_id = await client.create_session(scenario.customer)
    if session.simulate is None:
        for turn in session.turns:
            decide = _decider(turn.operator, session.operator, scenario.operator)
            scripted = await client.turn(session_id, turn.say, decide)
            await client.resolve_recalled(scripted, scenario.customer)
            wanted = turn.expect.memory
            if wanted is not None and (wanted.stored or wanted.absent):
                scripted.memories = await client.memories(scenario.customer)
            record.turns.append(scripted)
    else:
        customer = SimulatedCustomer(session.simulate, scenario.facts, scenario.language)
        decide = _decider(session.operator, scenario.operator)
        text: str | None = customer.first()
        while text is not None:
            simulated: TurnRecord = await client.turn(session_id, text, decide)
            await client.resolve_recalled(simulated, scenario.customer)
            record.turns.append(simulated)
            text = customer.answer(simulated.reply) if simulated.status == "completed" else None
    record.replies = await client.assistant_messages(session_id)
    record.memories = await client.memories(scenario.customer)
    return record
