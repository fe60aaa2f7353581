"""Reading memories: the owner-id cache behind recall stays bounded however many users come."""

from app.memory.records import Scope
from app.memory.service import MemoryService
from app.storage.session_writer import NO_SESSION


async def test_the_owner_cache_keeps_the_most_recent_users_and_recall_still_finds_the_rest(
    memory: MemoryService,
) -> None:
    queries = memory.queries
    queries.owners_max = 3
    users = [Scope("acme", f"user{i}") for i in range(8)]
    for i, user in enumerate(users):
        await memory.upsert(user, "preference.courier", f"courier {i}")
    for i, user in enumerate(users):
        recalled = await memory.recall(user, "which courier do I prefer", writer=NO_SESSION)
        assert [s.item.value for s in recalled.items] == [f"courier {i}"]
        assert queries.owners_cached() <= 3
    assert queries.owners_cached() == 3
    # An evicted user is looked up again, and still gets only their own memories.
    recalled = await memory.recall(users[0], "which courier do I prefer", writer=NO_SESSION)
    assert [s.item.value for s in recalled.items] == ["courier 0"]
