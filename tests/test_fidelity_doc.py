"""docs/fidelity.md is generated from the acceptance tests' ``fidelity`` markers
(``tests/frameworks/fidelity.py``): it must be what the generator writes today, and the generator
must read the markers, parameters and strict xfails of a test as they are."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.frameworks.fidelity import (
    AGNO,
    DOC,
    PYDANTIC_AI,
    Entry,
    NotCollected,
    collect,
    render,
    summary_table,
)


def test_docs_fidelity_md_is_generated_from_the_tests() -> None:
    try:
        entries = collect()
    except NotCollected as e:  # a framework not installed here: its rows cannot be generated
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"not every framework test module can be collected here: {e}")
    assert DOC.read_text() == render(entries), (
        "docs/fidelity.md is out of date with the tests' fidelity markers (tests/frameworks/fidelity.py): "
        "run python scripts/fidelity.py")


CLAIMS = '''
    import pytest
    from tests.frameworks.fidelity import AGNO, PYDANTIC_AI, by_param, fidelity

    GAP = pytest.mark.xfail(strict=True, reason="the gap,\\n  on two lines")

    @pytest.fixture(params=["blocking", pytest.param("streamed", marks=GAP)])
    def run(request):
        return request.param

    @pytest.mark.parametrize("agent", ["weather", pytest.param("booking", marks=GAP)])
    @fidelity(PYDANTIC_AI, by_param("agent", {"weather": "parallel tools", "booking": "failing tool"}))
    def test_by_agent(agent):
        pass

    @fidelity(AGNO, "team", "parallel tools")
    def test_team(run):
        pass

    def test_not_a_claim():
        pass
'''


def _claims(tmp_path: Path, source: str) -> list[Entry]:
    test = tmp_path / "test_claims.py"
    test.write_text(textwrap.dedent(source))
    return collect([str(test)])


def test_claims_are_read_per_parameter_with_their_strict_xfails(tmp_path: Path) -> None:
    """Parametrize marks and a fixture's param marks are seen at collection; a scenario is exact
    unless one of its tests is an xfail, whose reason (on one line) says why."""
    entries = _claims(tmp_path, CLAIMS)
    agno, pydantic_ai = AGNO.framework, PYDANTIC_AI.framework
    gap = "the gap, on two lines"
    assert [(e.framework, e.scenario, e.test, e.xfail) for e in entries] == [
        (pydantic_ai, "parallel tools", "test_by_agent", None),
        (pydantic_ai, "failing tool", "test_by_agent", gap),
        (agno, "team", "test_team", None),
        (agno, "parallel tools", "test_team", None),
        (agno, "team", "test_team", gap),
        (agno, "parallel tools", "test_team", gap),
    ]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in summary_table(entries)[2:]]
    assert [(r[0], r[2], r[3]) for r in rows if r[2] != "—"] == [
        (pydantic_ai, "parallel tools", "yes"),
        (pydantic_ai, "failing tool", f"no (xfail: {gap})"),
        (agno, "team", f"no (xfail: {gap})"),
        (agno, "parallel tools", f"no (xfail: {gap})"),
    ]


def test_a_claim_with_a_non_strict_xfail_is_refused(tmp_path: Path) -> None:
    """A non-strict xfail that starts passing would leave the document claiming a gap that is gone."""
    with pytest.raises(RuntimeError, match="must be strict=True"):
        _claims(tmp_path, '''
            import pytest
            from tests.frameworks.fidelity import AGNO, fidelity

            @pytest.mark.xfail(reason="maybe")
            @fidelity(AGNO, "team")
            def test_team():
                pass
        ''')


def test_every_stack_needs_a_test_and_every_claim_a_registered_stack(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="stacks without a test"):
        render(_claims(tmp_path, CLAIMS))
