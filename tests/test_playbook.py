"""Playbooks: shipped ones load; parameters are validated at load time with file:line errors."""
import textwrap

import pytest

from nodecheck.errors import ConfigError
from nodecheck.model import Node
from nodecheck.playbook import SHIPPED, load_playbook, resolve


def write(tmp_path, text):
    p = tmp_path / "book.yml"
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("name", sorted(p.stem for p in SHIPPED.glob("*.yml")))
def test_every_shipped_playbook_loads(name):
    book = load_playbook(name)
    assert book.name == name and book.checks and book.deadline_s > 0


def test_default_playbook_runs_ib_ports_with_its_timeout():
    book = load_playbook("default")
    [check] = book.checks
    assert check.spec.name == "ib.ports"
    assert [(p.name, p.argv, p.timeout_s) for p in check.probes] == [("ibstat", ("ibstat",), 10.0)]
    assert check.params.min_rate_gbps == 400


def test_timeout_and_params_apply(tmp_path):
    book = load_playbook(str(write(tmp_path, """\
        version: 1
        deadline_s: 30
        select: {labels: [gpu]}
        checks:
          ib.ports: {timeout_s: 2.5, expected_ports: 4, devices: [mlx5_0]}
        """)))
    [check] = book.checks
    assert check.probes[0].timeout_s == 2.5
    assert (check.params.expected_ports, check.params.devices) == (4, ["mlx5_0"])
    assert book.deadline_s == 30 and len(book.sha256) == 64
    assert book.selects(Node("a", "a", labels=frozenset({"gpu", "h100"})))
    assert not book.selects(Node("b", "b"))


@pytest.mark.parametrize("text, line, fragment, hint", [
    ("checks:\n  ib.prots: {}\n", 2, "unknown check 'ib.prots'", "did you mean 'ib.ports'"),
    ("checks:\n  ib.ports:\n    min_rate_gbps: 3OO\n", 3, "min_rate_gbps", ""),
    ("checks:\n  ib.ports:\n    min_rate: 400\n", 3, "unknown key 'checks.ib.ports.min_rate'", "did you mean 'min_rate_gbps'"),
    ("checks:\n  ib.ports:\n    link_layer: IB\n", 3, "link_layer", ""),
    ("checks:\n  ib.ports:\n    timeout_s: 0\n", 3, "timeout_s", ""),
    ("checks:\n  ib.ports:\n    expected_ports: -1\n", 3, "expected_ports", ""),
    ("deadline_s: -5\nchecks:\n  ib.ports: {}\n", 1, "deadline_s", ""),
    ("version: 2\nchecks:\n  ib.ports: {}\n", 1, "version", ""),
    ("checks: {}\n", 1, "no enabled checks", "nodecheck checks"),
    ("checks:\n  ib.ports: {enabled: false}\n", 1, "no enabled checks", ""),
    ("chekcs:\n  ib.ports: {}\n", 1, "unknown key 'chekcs'", "did you mean 'checks'"),
    ("checks:\n  ib.ports: {\n", 3, "malformed YAML", ""),
])
def test_playbook_errors_name_file_line_and_fix(tmp_path, text, line, fragment, hint):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_playbook(str(path))
    err = caught.value
    assert (err.file, err.line) == (str(path), line), str(err)
    assert fragment in err.message
    assert hint in err.hint


def test_an_unknown_playbook_name_suggests_a_shipped_one():
    with pytest.raises(ConfigError) as caught:
        resolve("defualt")
    assert "no playbook named 'defualt'" in caught.value.message
    assert "did you mean 'default'" in caught.value.hint


def test_a_playbook_on_the_search_path_is_found_by_name(tmp_path, monkeypatch):
    (tmp_path / "site.yml").write_text("checks:\n  ib.ports: {}\n")
    monkeypatch.setenv("NODECHECK_PLAYBOOK_PATH", str(tmp_path))
    assert resolve("site") == tmp_path / "site.yml"
