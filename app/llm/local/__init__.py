"""The offline model `hermes/local`: NLU + a deterministic dialogue policy + reply templates.

`policy.py` decides, `templates.py` and `replies.py` word the answers, `provider.py` serves it
through LiteLLM (importing that module imports LiteLLM). See docs/offline-model.md.
"""
