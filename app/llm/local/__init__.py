"""The offline model `hermes/local`: NLU + a deterministic dialogue policy + reply templates.

`policy.py` decides, `templates.py` and `replies.py` word the answers, `model.py` serves it as
a `ChatModel` in-process (no LiteLLM). See docs/offline-model.md.
"""
