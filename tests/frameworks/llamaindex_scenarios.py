"""What the LlamaIndex runs (``llamaindex_run.py``, in the LlamaIndex venv) and their checks
(``tests/test_frameworks_llamaindex.py``, in the main one) share: the question, model names, tool
results and answers. Standard library only: both interpreters import it.

The model names are real OpenAI ones: ``llama_index.llms.openai.OpenAI`` looks a model's context
window up by name and refuses names it does not know.
"""

QUESTION = "What's the weather in Paris and Rome, and can you get me a table at Chez Test for 2?"
PLANNER_MODEL = "gpt-4o"
WEATHER_MODEL = "gpt-4o-mini"
REACT_MODEL = "gpt-4.1"
WEATHER = {"Paris": "sunny, 21C", "Rome": "sunny, 25C", "Oslo": "rainy, 8C"}
TABLE_ERROR = "Chez Test is fully booked"
HANDOFF_REASON = "Oslo weather"
FINAL_ANSWER = "Paris is sunny (21C), Rome is sunny (25C), Oslo is rainy (8C); Chez Test is fully booked."
REACT_ANSWER = "Paris is sunny (21C); Chez Test is fully booked."
REACT_THOUGHTS = ("I need the weather in Paris.", "Now I book the table.", "I can answer without using any more tools.")
