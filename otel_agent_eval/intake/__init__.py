"""Intake: what the app's threads (or a receiver) hand over, and the one rule that decides what is kept.

``admission.py``: ``Intake``, the rule and admission for spans and log records from every
source, and the bounded hand-over to the collector; ``waiting.py``: spans of traces not yet
known (records intake); ``processor.py``: ``AgentEvalProcessor`` and ``install()``, the SDK
span-processor shell; ``logs.py``: which log records are GenAI content, and the SDK
log-record processor.
"""
