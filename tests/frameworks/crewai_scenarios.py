"""Constants shared by the CrewAI runner (``crewai_run.py``, in the CrewAI venv) and its test."""

QUESTION = "What's the weather in Paris and Rome, and can you get me a table at Chez Test for 2?"
TABLE_ERROR = "Chez Test is fully booked"
ANSWER = "Paris is sunny (21C), Rome is sunny (25C); Chez Test is fully booked."
RESEARCH_TASK = "Find the weather in Oslo."
RESEARCH_ANSWER = "Oslo is rainy, 8C."
WRITE_TASK = "Write one sentence of advice for a trip to Oslo."
WRITE_ANSWER = "Pack an umbrella for Oslo."

PLANNER_MODEL = "m-planner"
WEATHER_MODEL = "m-weather"
WRITER_MODEL = "m-writer"

WEATHER = {"Paris": "sunny, 21C", "Rome": "sunny, 25C", "Oslo": "rainy, 8C"}
