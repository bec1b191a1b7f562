"""promtool check rules and promtool test rules on deploy/prometheus; the Wilson bounds they expect."""

from __future__ import annotations

import math
import re
import subprocess

import pytest

from tests.deploy.test_deploy_assets import DEPLOY, RULES_FILE, require_binary, yaml_module

TESTS_DIR = DEPLOY / "prometheus" / "tests"


def test_promtool_check_rules() -> None:
    promtool = require_binary("promtool")
    proc = subprocess.run([promtool, "check", "rules", str(RULES_FILE)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_test_rules() -> None:
    promtool = require_binary("promtool")
    files = sorted(TESTS_DIR.glob("*.yml"))
    assert len(files) >= 2
    proc = subprocess.run(
        [promtool, "test", "rules", *map(str, files)],
        capture_output=True, text=True, timeout=300, cwd=TESTS_DIR, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def wilson(passed: float, judged: float, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score bounds of passed / judged, the closed form the recording rules implement."""
    p = passed / judged
    centre = p + z * z / (2 * judged)
    half = z * math.sqrt(p * (1 - p) / judged + z * z / (4 * judged * judged))
    return (centre - half) / (1 + z * z / judged), (centre + half) / (1 + z * z / judged)


def _expand(values: str) -> list[float]:
    """promtool's expanding notation: 'a+bxn' (or 'a-bxn') is n + 1 values, a plain number one."""
    out: list[float] = []
    for token in values.split():
        m = re.fullmatch(r"(-?[\d.e+]+?)([+-])([\d.e]+)x(\d+)", token)
        if m is None:
            out.append(float(token))
            continue
        start, sign, step, count = float(m.group(1)), m.group(2), float(m.group(3)), int(m.group(4))
        out.extend(start + (step if sign == "+" else -step) * i for i in range(count + 1))
    return out


def _minutes(duration: str) -> int:
    value, unit = int(duration[:-1]), duration[-1]
    return value * {"m": 1, "h": 60, "d": 1440}[unit]


def _increase(series: dict[str, list[float]], agent: str, outcome: str, now: int, back: int) -> float:
    """How much ``agent``'s ``outcome`` counter grew over the ``back`` steps before step ``now``."""
    (values,) = [v for k, v in series.items() if f'agent="{agent}"' in k and f'outcome="{outcome}"' in k]
    return values[now] - values[now - back]


def test_recorded_bounds_in_promtool_tests_match_the_closed_form() -> None:
    """The expected bounds in score-drop.test.yml are the closed form of the counts in its own input series."""
    doc = yaml_module().safe_load((TESTS_DIR / "score-drop.test.yml").read_text())
    checked = 0
    for case in doc["tests"]:
        step = _minutes(case["interval"])
        series = {s["series"]: _expand(s["values"]) for s in case["input_series"]}
        for check in case.get("promql_expr_test", []):
            m = re.search(r"wilson_(lower|upper):rate(\w+)\{agent=\"([^\"]+)\"\}", check["expr"])
            if m is None:
                continue
            bound, window, agent = m.groups()
            now, back = _minutes(check["eval_time"]) // step, _minutes(window) // step
            passed, failed = _increase(series, agent, "pass", now, back), _increase(series, agent, "fail", now, back)
            expected = wilson(passed, passed + failed)[0 if bound == "lower" else 1]
            (sample,) = check["exp_samples"]
            assert sample["value"] == pytest.approx(expected, rel=1e-12), (check["expr"], passed, failed)
            checked += 1
    assert checked == 4


def test_wilson_closed_form() -> None:
    """Known values: 15 of 30 is symmetric around 0.5; 0 of 10 and 10 of 10 stay inside [0, 1]."""
    lower, upper = wilson(15, 30)
    assert lower == pytest.approx(0.33154, abs=1e-5) and upper == pytest.approx(1 - lower)
    assert wilson(0, 10)[0] == pytest.approx(0.0, abs=1e-12) and wilson(0, 10)[1] == pytest.approx(0.27754, abs=1e-5)
    assert wilson(10, 10)[1] == pytest.approx(1.0, abs=1e-12)
