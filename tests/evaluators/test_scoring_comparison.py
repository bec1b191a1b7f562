"""Our column of docs/scoring.md's comparison table: each row's label and score, as documented.

The rows live in benchmarks/scoring_comparison.py (which also runs multivon-eval in its own
environment to fill that column); here only our results are checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from scoring_comparison import CASES, Case, ours, table


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_our_column(case: Case) -> None:
    label, score = ours(case)
    assert label == case.ours[0]
    assert score == (pytest.approx(case.ours[1]) if case.ours[1] is not None else None)


def test_docs_table_is_the_scripts() -> None:
    """docs/scoring.md shows the rows this script prints (multivon-eval column aside)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "scoring.md").read_text()
    for line in table(None).splitlines()[2:]:
        cells = line.split(" | ")
        ours_part = " | ".join(cells[:5])  # case, expected, called, mode, ours
        assert ours_part in docs, ours_part
