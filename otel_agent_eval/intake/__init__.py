"""Intake: what the app's threads (or a receiver) hand over, and the one rule that decides what is kept.

``processor.py``: ``AgentEvalProcessor`` and ``install()``, the SDK span-processor shell;
``logs.py``: the SDK log-record processor for GenAI content carried by log records.
"""
