"""`nodecheck explain CHECK` and `nodecheck checks --format json`: both render the one reference
model (app/checks_reference.py) of every registered check, with its example messages per status."""

from __future__ import annotations

import json

import pytest

from nodecheck.app.checks_examples import ACTIVE_TOOLS, CORPUS, EXAMPLES, RUNNER_EXAMPLES
from nodecheck.app.checks_reference import explain, reference, render
from nodecheck.checks import all_checks
from nodecheck.cli import main
from nodecheck.core.model import Status
from tests.helpers import DATA

CHECKS = sorted(all_checks())


@pytest.mark.parametrize("name", CHECKS)
def test_every_check_has_a_pass_and_a_non_pass_example(name):
    statuses = [status for status, _ in EXAMPLES[name]]
    assert Status.PASS in statuses, f"{name}: no PASS example in app/checks_examples.py"
    assert any(s is not Status.PASS for s in statuses), f"{name}: no non-PASS example"
    assert len(statuses) == len(set(statuses)), f"{name}: one example per status"
    assert all(message.strip() for _, message in EXAMPLES[name])


def test_examples_and_corpus_name_only_registered_checks_and_existing_data():
    assert set(EXAMPLES) == set(CHECKS)
    assert set(CORPUS) == set(CHECKS)
    for name, dirs in CORPUS.items():
        for d in dirs:
            assert (DATA / d).is_dir(), f"{name}: tests/data/{d} is not there"
    assert set(ACTIVE_TOOLS) == {name for name, spec in all_checks().items() if spec.scope == "active"}


def own_block(page: str) -> str:
    """The statuses the check's own judge gives, as explain lists them."""
    return (
        page.split("Statuses it gives, with an example message from its tests:\n", 1)[1].split("\n\nAny", 1)[0] + "\n"
    )


@pytest.mark.parametrize("name", CHECKS)
def test_explain_works_for_every_check_and_lists_every_status_it_documents(name, capsys):
    assert main(["explain", name]) == 0
    page = capsys.readouterr().out
    ref = reference(all_checks()[name])
    assert page == explain(ref)
    assert page.startswith(f"{name}  ({ref.scope}")
    assert ref.description in page
    statuses = page.split("Statuses it gives, with an example message from its tests:\n", 1)[1]
    own = statuses.split("\n\nAny check can also be", 1)[0].splitlines()
    assert [line.split()[0] for line in own] == [s.name for s, _ in EXAMPLES[name]]
    for status, message in EXAMPLES[name]:
        assert f"  {status.name:<11}  {message}\n" in own_block(page)
    for status, message in RUNNER_EXAMPLES:
        assert f"  {status.name:<11}  {message}\n" in page
    assert f"code: {ref.source}, function {ref.function}" in page
    for field in all_checks()[name].params.model_fields:
        assert f"\n  {field}: " in page


def test_explain_ib_ports_gives_parameters_with_defaults_and_bounds_tools_and_sources(capsys):
    assert main(["explain", "ib.ports"]) == 0
    page = capsys.readouterr().out
    assert "  min_rate_gbps: number, default None\n      bounds: strict type, > 0, finite\n" in page
    assert "  ibstat: ibstat  (timeout 10 s)\n" in page
    assert "Tools it calls (where present): ibstat\n" in page
    assert "  FAIL         mlx5_3/1: Down/Polling, expected Active/LinkUp\n" in page
    assert "  UNREACHABLE  unreachable: connect timeout after 10 s to node7:22\n" in page
    assert "code: nodecheck/checks/ib.py, function ports" in page
    assert "tested on recorded outputs: tests/data/ibstat/ (provenance: tests/data/SOURCES.md)" in page


def test_an_unknown_check_is_bad_input_with_a_guess(capsys):
    assert main(["explain", "ib.port"]) == 64
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "nodecheck: error: unknown check ib.port; did you mean ib.ports? (`nodecheck checks` lists them)\n"
    )


def test_an_unknown_check_with_nothing_close_gets_no_guess_and_control_characters_are_quoted(capsys):
    assert main(["explain", "zzz\x1b[2J"]) == 64
    err = capsys.readouterr().err
    assert err == "nodecheck: error: unknown check 'zzz\\x1b[2J' (`nodecheck checks` lists them)\n"


def test_checks_format_json_walks_the_registry(capsys):
    assert main(["checks", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 1
    assert [c["name"] for c in doc["checks"]] == CHECKS
    assert [r["status"] for r in doc["runner_statuses"]] == ["skipped", "error", "timeout", "unreachable"]
    assert {p["name"] for p in doc["common_params"]} == {"timeout_s", "enabled"}
    for check in doc["checks"]:
        spec = all_checks()[check["name"]]
        assert check["scope"] == spec.scope
        assert check["description"] == spec.description
        assert [p["name"] for p in check["params"]] == list(spec.params.model_fields)
        assert [(s["status"], s["example"]) for s in check["statuses"]] == [
            (status.value, message) for status, message in EXAMPLES[check["name"]]
        ]
        assert check["source"]["path"] == spec.judge.__module__.replace(".", "/") + ".py"
        assert check["corpus"] == [f"tests/data/{d}" for d in CORPUS[check["name"]]]
        for probe in check["probes"]["list"]:
            assert set(probe["tools"]) <= set(check["tools"])


def test_checks_json_gives_a_parameter_s_default_as_a_value_and_its_bounds():
    doc = json.loads(render(all_checks(), "json"))
    ports = next(c for c in doc["checks"] if c["name"] == "ib.ports")
    params = {p["name"]: p for p in ports["params"]}
    assert params["link_layer"]["default"] == "InfiniBand"
    assert params["link_layer"]["default_text"] == "'InfiniBand'"
    assert params["min_rate_gbps"]["bounds"] == {"gt": 0}
    assert params["expected_ports"]["bounds"] == {"ge": 0}
    assert ports["probes"]["list"] == [
        {"name": "ibstat", "command": "ibstat", "timeout_s": 10.0, "stdin_script": False, "tools": ["ibstat"]}
    ]
    assert ports["tools"] == ["ibstat"]


def test_the_markdown_reference_shows_the_same_examples():
    page = render(all_checks(), "markdown")
    for name in CHECKS:
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for status, message in EXAMPLES[name]:
            assert f"| {status.name} | {message.replace('|', chr(92) + '|')} |" in section
        assert "Statuses, each with an example message from its tests:" in section
