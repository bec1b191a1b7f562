"""What the Semantic Kernel runs (``semantic_kernel_run.py``, in the Semantic Kernel venv) and their
checks (``tests/test_frameworks_semantic_kernel.py``, in the main one) share. Standard library only:
both interpreters import it.

Semantic Kernel advertises a plugin's functions to the model as ``{plugin}-{function}``: the
scripted model requests them by those names.
"""

QUESTION = "What's the weather in Paris and Rome, and can you get me a table at Chez Test for 2?"
PLANNER_MODEL = "m-planner"
WEATHER_MODEL = "m-weather"
WEATHER = {"Paris": "sunny, 21C", "Rome": "sunny, 25C", "Oslo": "rainy, 8C"}
TABLE_ERROR = "Chez Test is fully booked"
WEATHER_TASK = "Weather in Oslo?"
WEATHER_ANSWER = "Oslo is rainy, 8C."
ANSWER = "Paris is sunny (21C), Rome is sunny (25C); Chez Test is fully booked."
FINAL_ANSWER = "Paris is sunny (21C), Rome is sunny (25C), Oslo is rainy (8C); Chez Test is fully booked."
GET_WEATHER, BOOK_TABLE, ASK_WEATHER = "Travel-get_weather", "Travel-book_table", "WeatherAgent-ask"
