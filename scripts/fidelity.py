"""Write docs/fidelity.md from the acceptance tests' ``fidelity`` markers (``tests/frameworks/fidelity.py``).

Collects the tests only (``pytest --collect-only``: no framework runs), so it needs the test
environment the suite uses (every framework test module importable). ``--check`` writes nothing and
exits 1 when the document is out of date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.frameworks.fidelity import DOC, collect, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/fidelity.md is out of date")
    args = parser.parse_args(argv)
    text = render(collect())
    if args.check:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is out of date: run python scripts/fidelity.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
