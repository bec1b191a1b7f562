"""promtool check rules and promtool test rules on deploy/prometheus."""

from __future__ import annotations

import subprocess

from test_deploy_assets import DEPLOY, RULES_FILE, require_binary

TESTS_DIR = DEPLOY / "prometheus" / "tests"


def test_promtool_check_rules() -> None:
    promtool = require_binary("promtool")
    proc = subprocess.run([promtool, "check", "rules", str(RULES_FILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_test_rules() -> None:
    promtool = require_binary("promtool")
    files = sorted(TESTS_DIR.glob("*.yml"))
    assert len(files) >= 2
    proc = subprocess.run(
        [promtool, "test", "rules", *map(str, files)], capture_output=True, text=True, timeout=300, cwd=TESTS_DIR
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
