"""What the AutoGen AgentChat runs (``autogen_run.py``, in the AutoGen venv) and their checks
(``tests/test_frameworks_autogen.py``, in the main one) share. Standard library only: both
interpreters import it.
"""

QUESTION = "What's the weather in Paris and Rome, and can you get me a table at Chez Test for 2?"
PLANNER_MODEL = "m-planner"
WEATHER_MODEL = "m-weather"
WEATHER = {"Paris": "sunny, 21C", "Rome": "sunny, 25C", "Oslo": "rainy, 8C"}
TABLE_ERROR = "Chez Test is fully booked"
ANSWER = "Paris is sunny (21C), Rome is sunny (25C); Chez Test is fully booked."
FINAL_ANSWER = "Oslo is rainy (8C); Paris is sunny, Rome is sunny; Chez Test is fully booked."
