"""The background half: buffer -> completion (assemble, sample) -> evaluation stages -> sinks.

``buffer.py`` and ``waiting.py`` hold spans until their trace completes; ``sampling.py``
admits traces and samples runs; ``core.py`` is the ``Pipeline`` that runs them on its
threads; ``stats.py`` counts everything.
"""
