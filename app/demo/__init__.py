"""The demo shop: one deployment's backend and the call-centre tools over it. Customers,
orders, shipments, tickets, refunds and returns in a SQLite file of their own, generated
deterministically (`generator.py`); the tools' handlers (`tools/`) take it as their
dependency, `ToolContext[ShopBackend]`, which `backend.SHOP` opens (listed under `providers:`
in tools.yaml) only when a configured tool needs it."""
