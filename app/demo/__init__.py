"""The demo business backend the built-in call-centre tools serve: customers, orders,
shipments, tickets, refunds and returns in a SQLite file of their own, generated
deterministically (`generator.py`) and opened for the tools by `services.open_demo`."""
