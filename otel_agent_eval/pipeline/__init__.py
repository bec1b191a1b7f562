"""The background half: buffer -> completion (assemble, flatten) -> sampling -> stages -> sinks.

``buffer.py`` holds spans until their trace completes; ``completion.py`` turns a completed
trace into agent runs (pure); ``sampling.py`` admits traces and samples runs; ``workers.py``
runs the evaluation stages and their watchdog; ``core.py`` is the ``Pipeline`` that owns
them and its collector thread; ``stats.py`` counts everything; ``build.py`` is the one place
that wires all of it from settings.
"""
