"""Assembly: the spans of a trace -> AgentTraces of per-turn AgentSteps (pure; docs/architecture.md, "Assembly").

* ``index``: one pass over a trace's spans: each read through the dialects whose markers it
  carries into an ``Operation``, parent/children and order, and the hints the framework rules
  are triggered by;
* ``core``: the grouping (scopes, steps, tool -> requested call) and one validation into the
  public model; it knows no framework;
* ``dialects``: one module per instrumentation/framework: how its spans read, and its
  structural rules (``RULES``).
"""

from .core import assemble

__all__ = ["assemble"]
