"""`hermes eval`: conversations judged by their end state (issue 13).

Scenario files (YAML under `evals/`) say who the customer is, what they say or know, and what
must hold afterwards: the demo database's rows, the tools called, the facts in the replies,
the memories kept. The runner plays them against the real HTTP API of an in-process or a
running service; the report gives task success overall, per intent, per language, the
held-out set on its own, and pass^k. docs/evaluation.md describes the format.
"""
