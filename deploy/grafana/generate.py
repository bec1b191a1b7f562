#!/usr/bin/env python3
"""Generate deploy/grafana/dashboards/*.json from deploy/grafana/dashboards_src.

Usage: python deploy/grafana/generate.py [--check]
With --check, writes nothing and exits 1 if a committed file is out of date.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "dashboards"


def render(model: dict[str, Any]) -> str:
    """Stable JSON text for a dashboard model."""
    return json.dumps(model, indent=2, sort_keys=True) + "\n"


def generate() -> dict[str, str]:
    """File name -> JSON text for every dashboard."""
    sys.path.insert(0, str(HERE))
    try:
        from dashboards_src import DASHBOARDS
    finally:
        sys.path.remove(str(HERE))
    return {f"{uid}.json": render(build()) for uid, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if committed JSON is stale")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        stale = [n for n, text in files.items() if not (OUT_DIR / n).is_file() or (OUT_DIR / n).read_text() != text]
        for name in stale:
            print(f"out of date: {OUT_DIR / name}", file=sys.stderr)
        return 1 if stale else 0
    OUT_DIR.mkdir(exist_ok=True)
    for name, text in files.items():
        (OUT_DIR / name).write_text(text)
        print(f"wrote {OUT_DIR / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
