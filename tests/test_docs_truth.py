"""What README.md and docs/ claim, held to the code: commands, flags, variables, metrics.

A user copies commands and names from the docs, so every ``otel-agent-eval`` command in a code
block must parse with the real argument parser, every ``--flag`` named in prose must exist (and
say its real default where the prose gives one), every ``OTEL_AGENT_EVAL_*`` variable named must be
one the code reads (and every one it reads must be documented), and every metric the real server
registers must be in the docs with its type and labels. So must defaults stated in the prose,
default thresholds and versions, the recording rules' table, the deployed command lines, and every
Python example must run as written. The configuration tables themselves are
generated and compared elsewhere (``tests/pipeline/test_sampling_buffer_config.py``,
``tests/evaluators/judge/test_judge_units.py``); the metric contract of the dashboards and rules
lives in ``tests/deploy/test_deploy_assets.py``, held here to what the code registers.
``docs/performance.md`` is left out: its flags are the benchmark scripts'.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_agent_eval.cli.main import build_parser
from otel_agent_eval.config import ENV_PREFIX, Settings
from otel_agent_eval.evaluators.judge.settings import JUDGE_PREFIX, JudgeSettings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "performance.md"),
        ROOT / "deploy" / "README.md", ROOT / "collector" / "README.md"]

# Flags the docs name that belong to another program, and where that program defines them.
OTHER_PROGRAMS = {
    "--tool-definitions": "benchmarks/pipeline.py",  # docs/scoring.md: the benchmark's option
    "--enable-feature": None,  # deploy/README.md: Prometheus's own flag
}
# (Flags inside another program's command line in backticks, ``npm ci --prefix tests/js``, are not checked.)

# Variables of the test harness (tests/, scripts/), documented in the README's Development section.
HARNESS_VARIABLES = {"OTEL_AGENT_EVAL_VENVS", "OTEL_AGENT_EVAL_SKIP_FRAMEWORK_VENVS", "OTEL_AGENT_EVAL_FIDELITY_OUT"}


def _text(path: Path) -> str:
    return path.read_text()


def _where(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ------------------------------------------------------------------------------------ commands and flags


def doc_commands(text: str) -> Iterator[str]:
    """Every ``otel-agent-eval ...`` command of the text's shell code blocks (continuation lines joined,
    comments, leading ``VAR=value`` assignments and ``cd ... &&`` left out)."""
    for lang, block in re.findall(r"^```(\w*)\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        if lang not in ("bash", "sh", "shell", "console", ""):
            continue
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                if "otel-agent-eval" not in part:
                    continue
                lexer = shlex.shlex(part, posix=True, punctuation_chars=True)
                lexer.whitespace_split, lexer.commenters = True, "#"
                words = list(itertools.takewhile(lambda w: not set(w) <= set("();<>|&"), lexer))  # up to `>`, `|`
                while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
                    words = words[1:]
                if words and words[0].endswith("otel-agent-eval"):
                    yield shlex.join(words)


def cli_commands() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name (the parser built now, reading the environment now)."""
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def cli_options(command: str) -> dict[str, argparse.Action]:
    """The options of one subcommand."""
    return {flag: action for action in cli_commands()[command]._actions for flag in action.option_strings}


def all_cli_options() -> dict[str, list[argparse.Action]]:
    """Every option of every subcommand: flag -> its actions (several commands share some)."""
    out: dict[str, list[argparse.Action]] = {}
    for name in cli_commands():
        for flag, action in cli_options(name).items():
            out.setdefault(flag, []).append(action)
    return out


def test_doc_commands_are_found() -> None:
    commands = list(doc_commands(_text(README)))
    assert "otel-agent-eval demo" in " ".join(commands)
    assert any(c.startswith("otel-agent-eval serve --http-port 4318 --grpc-port -1") for c in commands), commands
    assert len(commands) >= 8, commands


@pytest.mark.parametrize("path", DOCS, ids=_where)
def test_every_command_in_the_docs_parses(path: Path) -> None:
    """What a user pastes is accepted by the CLI: subcommand, flags and their values."""
    parser = build_parser()
    for command in doc_commands(_text(path)):
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"{_where(path)}: `{command}` is not accepted by the CLI")


def manifest_commands() -> list[tuple[str, list[str]]]:
    """(where, arguments) of every otel-agent-eval container of the compose stack and the Kubernetes manifests."""
    yaml = pytest.importorskip("yaml")
    out = []
    compose = yaml.safe_load((ROOT / "deploy" / "compose" / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        if service.get("image", "").startswith("otel-agent-eval:"):
            out.append((f"compose {name}", service.get("command", ["serve"])))  # the Dockerfile's CMD
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            spec = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
            for container in spec.get("containers", []):
                if container["image"].startswith("otel-agent-eval:"):
                    out.append((f"{path.name} {container['name']}", container.get("args", ["serve"])))
    return out


def test_every_deployed_command_parses() -> None:
    commands = manifest_commands()
    assert len(commands) >= 3, commands
    parser = build_parser()
    for where, args in commands:
        try:
            parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"{where}: {args} is not accepted by the CLI")


def named_flags(text: str) -> Iterator[str]:
    """``--flag`` names in backticks in the prose (``--flag``, ``--flag VALUE``, ``--flag=VALUE``,
    ``evaluate --flag``); not those of another program's command line (``npm ci --prefix ...``)."""
    commands = set(cli_commands()) | {"otel-agent-eval"}
    for code in re.findall(r"`([^`\n]+)`", text):
        first = code.split()[0]
        if not first.startswith("--") and first not in commands:
            continue
        yield from re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", code)


@pytest.mark.parametrize("path", DOCS, ids=_where)
def test_every_flag_the_docs_name_exists(path: Path) -> None:
    options = all_cli_options()
    unknown = sorted({f for f in named_flags(_text(path)) if f not in options and f not in OTHER_PROGRAMS})
    assert not unknown, f"{_where(path)} names flags no otel-agent-eval command has: {unknown}"


def test_flags_of_other_programs_exist_there() -> None:
    for flag, program in OTHER_PROGRAMS.items():
        if program is not None:
            assert f'"{flag}"' in (ROOT / program).read_text(), (flag, program)


# "`--flag` (0.8)", "`--flag N` (default 50,000 ...)", "`--flag`, 1 s" (a default in the prose).
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
STATED_DEFAULT = re.compile(rf"`(--[a-z][a-z0-9-]*)[^`]*`(?: \({NUMBER}\)| \(default {NUMBER}|, {NUMBER} s\b)")


def test_flag_defaults_in_the_readme_are_the_parsers() -> None:
    options = all_cli_options()
    stated = [(flag, "".join(values)) for flag, *values in STATED_DEFAULT.findall(_text(README))]
    assert len(stated) >= 4, stated
    for flag, value in stated:
        assert flag in options, flag
        defaults = [action.default for action in options[flag]]
        assert float(value.replace(",", "")) in defaults, (flag, value, defaults)


# ------------------------------------------------------------------------------------------ variables

VARIABLE = re.compile(r"\b(" + ENV_PREFIX + r"[A-Z0-9_]*[A-Z0-9])(_?\*)?")


def code_variables() -> set[str]:
    """Every OTEL_AGENT_EVAL_* variable the package reads: the settings' fields and the names in its source."""
    names = {ENV_PREFIX + f.upper() for f in Settings.model_fields} | {JUDGE_PREFIX + f.upper() for f in JudgeSettings.model_fields}
    for source in (ROOT / "otel_agent_eval").rglob("*.py"):
        names |= {m.group(1) for m in VARIABLE.finditer(source.read_text()) if not m.group(2)}
    # Not "OTEL_AGENT_EVAL" alone, nor the docstrings' placeholder: "Field ``x`` is read from ``OTEL_AGENT_EVAL_X``".
    return {n for n in names if n not in (ENV_PREFIX.rstrip("_"), JUDGE_PREFIX.rstrip("_")) and not n.endswith("_X")}


def test_every_variable_the_docs_name_is_read_by_the_code() -> None:
    known = code_variables() | HARNESS_VARIABLES
    unknown = []
    for path in DOCS:
        for m in VARIABLE.finditer(_text(path)):
            name, star = m.group(1), m.group(2)
            if star:  # OTEL_AGENT_EVAL_JUDGE_* or ..._BUDGET_*: a family of real variables
                if not any(k.startswith(name) for k in known):
                    unknown.append(f"{_where(path)}: {name}{star}")
            elif name not in known:
                unknown.append(f"{_where(path)}: {name}")
    assert not unknown, "variables no code reads:\n" + "\n".join(sorted(set(unknown)))


def test_every_variable_the_code_reads_is_documented() -> None:
    docs = "\n".join(_text(p) for p in DOCS)
    missing = sorted(n for n in code_variables() if f"`{n}" not in docs)
    assert not missing, f"read by the code, named in no doc: {missing}"


def security_rows() -> list[tuple[list[str], list[str], str]]:
    """(flags, variables, default) of the README's serve security table."""
    text = _text(README).split("Security. The spans `serve` accepts", 1)[1].split("\n\n", 2)[1]
    rows = []
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        flags = re.findall(r"`(--[a-z-]+)`", cells[0])
        variables = re.findall(r"`([A-Z_]+)`", cells[1])  # written in full, so that a search finds them
        rows.append((flags, variables, cells[2].strip("`")))
    return rows


def test_serve_security_flags_read_their_variables_with_the_stated_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row: the flag exists, defaults to the row's default, and takes the row's variable's value."""
    rows = security_rows()
    assert len(rows) == 4, rows
    for flags, variables, default in rows:
        assert len(flags) == len(variables), (flags, variables)
        for flag, variable in zip(flags, variables):
            monkeypatch.delenv(variable, raising=False)
            expected = None if default == "unset" else default
            assert cli_options("serve")[flag].default == expected, (flag, default)
            monkeypatch.setenv(variable, "/from/the/variable")
            assert cli_options("serve")[flag].default == "/from/the/variable", (flag, variable)
            monkeypatch.delenv(variable)


# -------------------------------------------------------------------------------------------- metrics


@pytest.fixture(scope="module")
def registered() -> dict[str, tuple[str, set[str]]]:
    """Exposed name -> (type, label names) of every metric family a real ``serve`` registers with a judge
    configured (its endpoint is never called): pipeline, results, judge and server metrics."""
    pytest.importorskip("openai")
    from otel_agent_eval.serve.server import EvalServer, ServeOptions

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("OTEL_AGENT_EVAL_JUDGE_MODEL", "judge-model")
        monkeypatch.setenv("OTEL_AGENT_EVAL_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
        server = EvalServer(Settings.load(env={}), ServeOptions(host="127.0.0.1", http_port=None, grpc_port=None, admin_port=None))
    judge = server._built.evaluation.judge
    assert judge is not None and judge.metrics is not None
    try:
        # Families whose label names only show once a series exists: from the objects that declare them.
        declared = {m._name: set(m._labelnames) for m in vars(judge.metrics).values() if hasattr(m, "_labelnames")}
        sink = next(s for s in server.pipeline.sinks if hasattr(s, "metrics"))
        declared |= {name: set(labels) for name, _, _, labels, _, _ in sink.metrics._families()}
        out = {}
        for family in server.registry.collect():
            labels = getattr(family, "_labelnames", None)
            labels = set(labels) if labels is not None else declared[family.name]
            out[family.name + ("_total" if family.type == "counter" else "")] = (family.type, labels)
        return out
    finally:
        server._built.evaluation.close()


def metric_rows(text: str) -> Iterator[tuple[str, str, set[str]]]:
    """(name, type, labels) of every row of a metrics table: ``| `name` | type | labels ... |``; a
    parenthesised remark in the labels cell is not a label."""
    for line in text.splitlines():
        m = re.match(r"\|\s*`(agent_eval_\w+)`\s*\|\s*(counter|gauge|histogram)\s*\|([^|]*)\|", line)
        if m:
            labels = re.sub(r"\([^)]*\)", "", m.group(3))
            yield m.group(1), m.group(2), {w.strip() for w in labels.split(",") if w.strip()}


def prose_metrics(text: str) -> Iterator[tuple[str, set[str] | None]]:
    """``agent_eval_x_total{a,b}`` in backticks: (name, labels), labels None when no braces are given;
    a selector (``{reason="shutdown"}``) gives the labels it names."""
    for name, braces in re.findall(r"`(agent_eval_\w+?)(\{[^}`]*\})?`", text):
        labels = None if not braces else {w.split("=")[0].strip() for w in braces[1:-1].split(",")}
        yield name, labels




def test_the_metric_tables_are_found(registered: dict[str, tuple[str, set[str]]]) -> None:
    rows = list(metric_rows(_text(README)))
    assert len(rows) >= 30, rows
    assert len(registered) >= 40, registered


@pytest.mark.parametrize("path", DOCS, ids=_where)
def test_metric_tables_match_the_code(path: Path, registered: dict[str, tuple[str, set[str]]]) -> None:
    wrong = []
    for name, kind, labels in metric_rows(_text(path)):
        if name not in registered:
            wrong.append(f"{name}: not registered")
        elif registered[name] != (kind, labels):
            wrong.append(f"{name}: documented {kind} {sorted(labels)}, registered {registered[name][0]} {sorted(registered[name][1])}")
    assert not wrong, f"{_where(path)}:\n" + "\n".join(wrong)


def test_every_registered_metric_is_in_the_readme(registered: dict[str, tuple[str, set[str]]]) -> None:
    """In the metrics table, or (server metrics) named in backticks with its labels."""
    text = _text(README)
    documented = {name: labels for name, _, labels in metric_rows(text)}
    for name, labels in prose_metrics(text):
        if labels is not None or name not in documented:
            documented.setdefault(name, labels if labels is not None else set())
    missing = sorted(n for n in registered if n not in documented)
    assert not missing, f"registered, not in the README: {missing}"
    wrong = sorted(f"{n}: {sorted(documented[n])} != {sorted(registered[n][1])}" for n in registered
                   if documented[n] != registered[n][1])
    assert not wrong, "labels in the README differ from the code: " + ", ".join(wrong)


def test_every_metric_the_docs_name_is_registered(registered: dict[str, tuple[str, set[str]]]) -> None:
    """Names in backticks across the docs: a registered metric (or one of its histogram series), or a
    series of the recording rules (``deploy/prometheus/rules``)."""
    rules = (ROOT / "deploy" / "prometheus" / "rules" / "agent-eval.rules.yml").read_text()
    series = set(registered)
    series |= {f"{n}{s}" for n, (kind, _) in registered.items() if kind == "histogram" for s in ("_bucket", "_sum", "_count")}
    unknown = []
    for path in DOCS:
        for name, braces in re.findall(r"`(agent_eval_\w+?)(\{[^}`]*\})?`", _text(path)):
            if name not in series and f":{name}:" not in rules and not name.endswith("_"):
                unknown.append(f"{_where(path)}: {name}")
            elif braces and name in registered:
                labels = {w.split("=")[0].strip() for w in braces[1:-1].split(",")}
                if not labels <= registered[name][1]:  # `{outcome}` ("by outcome") or a selector: some of them
                    unknown.append(f"{_where(path)}: {name}{braces} (labels: {sorted(registered[name][1])})")
    assert not unknown, "metrics no code registers, or with other labels:\n" + "\n".join(sorted(set(unknown)))


def test_the_deploy_contract_is_what_the_code_registers(registered: dict[str, tuple[str, set[str]]]) -> None:
    """The dashboards' and rules' contract (tests/deploy) names registered metrics with their types and labels."""
    from tests.deploy.test_deploy_assets import CONTRACT_LABELS, CONTRACT_METRICS

    wrong = [f"{n}: contract {k}, registered {registered.get(n, ('none',))[0]}" for n, k in CONTRACT_METRICS.items()
             if registered.get(n, ("none",))[0] != k]
    wrong += [f"{n}: contract labels {sorted(labels)}, registered {sorted(registered[n][1])}"
              for n, labels in CONTRACT_LABELS.items() if registered[n][1] != labels]
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------------------------------ examples


def python_examples() -> list[tuple[str, str]]:
    """(where, code) of every Python code block of the docs."""
    out = []
    for path in DOCS:
        text = _text(path)
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
            out.append((f"{_where(path)}:{text[:m.start()].count(chr(10)) + 1}", m.group(1)))
    return out


@pytest.mark.parametrize(("where", "code"), python_examples(), ids=[w for w, _ in python_examples()])
def test_python_examples_run_as_written(where: str, code: str, tmp_path: Path) -> None:
    """Each block, alone, in a fresh interpreter: imports, names and arguments are the library's.
    A judge endpoint is configured (never called) for the blocks that build a judge from the environment.
    A block that says it is run by ``opentelemetry-instrument`` is, with console exporters."""
    code = code.replace("prometheus_port=9464", "prometheus_port=0")  # the port may be taken on a shared machine
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env |= {"PYTHONPATH": str(ROOT), "OTEL_AGENT_EVAL_JUDGE_MODEL": "judge-model",
            "OTEL_AGENT_EVAL_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"}
    command = [sys.executable, "-c", code]
    if "run as: opentelemetry-instrument python" in code.partition("\n")[0]:
        command = [str(Path(sys.executable).parent / "opentelemetry-instrument"), *command]
        env |= {"OTEL_TRACES_EXPORTER": "console", "OTEL_LOGS_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, f"{where}:\n{run.stderr}"
    assert "Traceback" not in run.stderr, f"{where}:\n{run.stderr}"


def test_the_readme_custom_evaluator_scores_as_it_says() -> None:
    from otel_agent_eval import AgentStep, AgentTrace

    (code,) = [c for _, c in python_examples() if "class AnswersInFrench" in c]
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102 (the README's own example, which the test exists to run)
    evaluator = namespace["AnswersInFrench"]()  # type: ignore[operator]

    def run(output: str | None) -> AgentTrace:
        return AgentTrace(trace_id="1" * 32, final_output=output, steps=[AgentStep(index=0, output=output)])

    assert [(r.label, r.score) for r in evaluator.evaluate(run("la commande est remboursée"))] == [("pass", 1.0)]
    assert [(r.label, r.score) for r in evaluator.evaluate(run("the order is refunded"))] == [("fail", 0.0)]
    assert [r.label for r in evaluator.evaluate(run(None))] == ["skipped"]


# ------------------------------------------------------------------------------------------ evaluators


def threshold_rows(text: str) -> Iterator[tuple[str, str]]:
    """(evaluator, default) of every table whose header has a "Default ..." column and whose rows start
    with an evaluator name in backticks."""
    column = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            column = None
        elif column is None:
            column = next((i for i, c in enumerate(cells) if c.startswith("Default")), None)
        elif re.fullmatch(r"`[a-z_]+`(?: \(opt-in\))?", cells[0]):
            yield cells[0].split("`")[1], cells[column]


def test_default_thresholds_in_the_docs_are_the_evaluators() -> None:
    from otel_agent_eval.evaluators import BUILTIN_EVALUATORS
    from otel_agent_eval.evaluators.judge.evaluators import JUDGE_EVALUATORS

    classes = {**BUILTIN_EVALUATORS, **JUDGE_EVALUATORS}
    readme = dict(threshold_rows(_text(README)))
    assert set(readme) == set(classes), "evaluators without a row in the README's tables, or rows of none"
    judge_doc = dict(threshold_rows(_text(ROOT / "docs" / "judge.md")))
    assert set(judge_doc) == set(JUDGE_EVALUATORS)
    # docs/scoring.md's headings: "### `tool_call_accuracy` (version 2, default threshold 1.0)".
    headings = re.findall(r"^### `(\w+)` \(([^)]*)\)", _text(ROOT / "docs" / "scoring.md"), re.MULTILINE)
    assert len(headings) >= 5, headings
    scoring = {}
    for name, remark in headings:
        version = re.search(r"version (\w+)", remark)
        assert version is None or version.group(1) == classes[name].version, (name, remark)
        scoring[name] = re.search(r"default threshold ([\d.]+)", remark).group(1)  # type: ignore[union-attr]
    for where, rows in (("README.md", readme), ("docs/judge.md", judge_doc), ("docs/scoring.md", scoring)):
        wrong = [f"{name}: {value} != {classes[name].default_threshold}" for name, value in rows.items()
                 if float(value) != classes[name].default_threshold]
        assert not wrong, f"{where}: " + ", ".join(wrong)


# "`OTEL_AGENT_EVAL_X` (default 200", "(5 s;", "(default 64 MiB": a default stated in the prose.
STATED_VARIABLE_DEFAULT = re.compile(
    r"`(" + ENV_PREFIX + r"\w+)`\s*\((?:default\s+)?(\d{1,3}(?:[ ,]\d{3})+|\d+(?:\.\d+)?)\s*(MiB|KiB)?(?=[\s;,)])"
)


def test_variable_defaults_stated_in_the_prose_are_the_settings() -> None:
    fields = {ENV_PREFIX + n.upper(): f for n, f in Settings.model_fields.items()}
    fields |= {JUDGE_PREFIX + n.upper(): f for n, f in JudgeSettings.model_fields.items()}
    stated = [(_where(p), *m.groups()) for p in DOCS for m in STATED_VARIABLE_DEFAULT.finditer(_text(p))]
    assert len(stated) >= 8, stated
    wrong = []
    for where, name, number, unit in stated:
        value = float(re.sub(r"[ ,]", "", number)) * {"MiB": 2**20, "KiB": 2**10, None: 1}[unit]
        if value != fields[name].default:
            wrong.append(f"{where}: {name} stated {number}{unit or ''}, default {fields[name].default}")
    assert not wrong, "\n".join(wrong)


def test_the_readme_expectation_rules_and_entry_point_are_the_libraries(tmp_path: Path) -> None:
    """The rules file example loads (a misspelt field is refused), and the entry-point group is the registry's."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from otel_agent_eval.evaluators.expectations import load_expectations
    from otel_agent_eval.evaluators.registry import ENTRY_POINT_GROUP

    text = _text(README)
    (rules,) = re.findall(r"^```json\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    (tmp_path / "rules.json").write_text(rules)
    loaded = load_expectations(tmp_path / "rules.json")
    assert [r.agent for r in loaded] == ["support-agent", "weather-agent"]
    (pyproject,) = re.findall(r"^```toml\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert list(tomllib.loads(pyproject)["project"]["entry-points"]) == [ENTRY_POINT_GROUP]


def documented_recorded_series() -> set[str]:
    """The series deploy/README.md's recording-rules table names, windows expanded:
    `a:rate{5m,1h}` -> a:rate5m, a:rate1h; `..._wilson_upper:...` repeats the row's first series' stem and windows."""
    text = _text(ROOT / "deploy" / "README.md").split("Recording rules follow", 1)[1].split("\n\n", 2)[1]
    prefix = re.search(r"prefix `([^`]+)`", text).group(1)  # type: ignore[union-attr]
    out = set()
    for line in text.splitlines()[2:]:
        first = None
        for name, op, windows in re.findall(r"`([\w.]+):(\w+|\.\.\.)(?:\{([^}]*)\})?`", line.split("|")[1]):
            if name.startswith("...") and first is not None:  # `..._wilson_upper:...`: the first one's stem and windows
                tail = name[3:]  # "_wilson_upper"
                name, op, windows = first[0][: first[0].index(tail.split("_")[1]) - 1] + tail, first[1], first[2]
            first = first or (name, op, windows)
            out |= {f"{prefix}{name}:{op}{w.strip()}" for w in (windows.split(",") if windows else [""])}
    return out


def test_the_recording_rules_table_is_the_rules_file() -> None:
    recorded = {r["record"] for r in pytest.importorskip("yaml").safe_load(
        (ROOT / "deploy" / "prometheus" / "rules" / "agent-eval.rules.yml").read_text())["groups"] for r in r["rules"] if "record" in r}
    assert documented_recorded_series() == recorded
