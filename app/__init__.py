"""Hermes Agent: an agent runtime for call-centre frontends."""

__version__ = "0.1.0"
