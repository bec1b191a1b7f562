"""``tests/multiprocess_app.py`` served by werkzeug with its reloader, as Flask's debug mode serves an app
(``tests/sinks/test_prometheus_multiprocess.py``; never collected by pytest): the watching parent imports the
app, and so installs the processor, before it starts the child that serves the requests."""

from __future__ import annotations

import os

from werkzeug.serving import run_simple

from tests.multiprocess_app import app

if __name__ == "__main__":
    run_simple("127.0.0.1", int(os.environ["RELOADER_APP_PORT"]), app, use_reloader=True, reloader_type="stat")
