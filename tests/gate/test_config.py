"""nodecheck.gate.config: where the gate config is found, how it merges, its errors, how it fills args."""

from __future__ import annotations

import textwrap
from argparse import Namespace
from pathlib import Path

import pytest

from nodecheck.core.errors import ConfigError
from nodecheck.gate import config as gateconfig
from nodecheck.gate.config import FALLBACK, GateOptions, apply, config_path, load


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# ---- config_path: first match wins -----------------------------------------------------------


def test_an_explicit_path_wins_even_if_it_does_not_exist(tmp_path):
    beside = write(tmp_path / "nodecheck.yml", "playbook: x\n")
    env = {"NODECHECK_GATE_CONFIG": str(tmp_path / "env.yml"), "SLURM_CONF": str(tmp_path / "slurm.conf")}
    assert config_path(str(tmp_path / "missing.yml"), env) == tmp_path / "missing.yml"
    assert config_path(str(beside), {}) == beside


def test_the_environment_variable_comes_next_and_is_not_checked_for_existence(tmp_path):
    write(tmp_path / "nodecheck.yml", "playbook: x\n")
    env = {"NODECHECK_GATE_CONFIG": str(tmp_path / "env.yml"), "SLURM_CONF": str(tmp_path / "slurm.conf")}
    assert config_path(None, env) == tmp_path / "env.yml"
    # and load() then says it cannot be read, rather than silently using the defaults
    with pytest.raises(ConfigError, match=rf"^{tmp_path}/env.yml: cannot read"):
        load(config_path(None, env), "prolog")


def test_nodecheck_yml_beside_slurm_conf(tmp_path):
    beside = write(tmp_path / "nodecheck.yml", "playbook: x\n")
    env = {"NODECHECK_GATE_CONFIG": "", "SLURM_CONF": str(tmp_path / "slurm.conf")}
    assert config_path(None, env) == beside
    assert config_path("", env) == beside  # an empty --config is no --config


def test_without_a_file_beside_slurm_conf_the_fallback_or_none(tmp_path, monkeypatch):
    env = {"SLURM_CONF": str(tmp_path / "slurm.conf")}
    fallback = Path(FALLBACK)
    expected = fallback if fallback.is_file() else None
    assert config_path(None, env) == expected
    # the fallback is used when it exists (is_file faked for that one path only)
    real = Path.is_file
    monkeypatch.setattr(Path, "is_file", lambda self: str(self) == FALLBACK or real(self))
    assert config_path(None, env) == fallback
    assert gateconfig.DEFAULT_SLURM_CONF == "/etc/slurm/slurm.conf"


def test_a_directory_named_nodecheck_yml_is_not_a_config(tmp_path):
    (tmp_path / "nodecheck.yml").mkdir()
    env = {"SLURM_CONF": str(tmp_path / "slurm.conf")}
    assert config_path(None, env) == (Path(FALLBACK) if Path(FALLBACK).is_file() else None)


# ---- load: top level < section ------------------------------------------------------------------

CONFIG = """\
    # /etc/slurm/nodecheck.yml
    output_dir: /var/lib/nodecheck/reports
    log_file: /var/log/nodecheck/gate.log
    retries: 2
    drain_on: [fail]
    prolog:     {playbook: prolog, deadline: 20}
    controller: {playbook: prolog, inventory: /etc/nodecheck/hosts.yml, drain_on: [fail, unreachable], retries: 0}
    health:
      playbook: health
      observe: true
    sweep:
    """


def test_load_merges_top_level_then_the_modes_section(tmp_path):
    path = write(tmp_path / "nodecheck.yml", CONFIG)
    prolog, source = load(path, "prolog")
    assert source == str(path)
    assert prolog == GateOptions(
        output_dir="/var/lib/nodecheck/reports",
        log_file="/var/log/nodecheck/gate.log",
        retries=2,
        drain_on=["fail"],
        playbook="prolog",
        deadline=20.0,
    )
    controller, _ = load(path, "controller")
    assert (controller.drain_on, controller.retries, controller.inventory, controller.output_dir) == (
        ["fail", "unreachable"],
        0,
        "/etc/nodecheck/hosts.yml",
        "/var/lib/nodecheck/reports",
    )
    health, _ = load(path, "health")
    assert (health.playbook, health.observe, health.retries, health.deadline) == ("health", True, 2, None)
    sweep, _ = load(path, "sweep")  # "sweep:" with nothing under it: the top level only
    assert sweep == GateOptions(
        output_dir="/var/lib/nodecheck/reports", log_file="/var/log/nodecheck/gate.log", retries=2, drain_on=["fail"]
    )


def test_no_file_and_an_empty_file_give_the_defaults(tmp_path):
    assert load(None, "health") == (GateOptions(), None)
    empty = write(tmp_path / "nodecheck.yml", "# nothing yet\n")
    assert load(empty, "health") == (GateOptions(), str(empty))


def test_an_unknown_mode_is_a_programming_error():
    with pytest.raises(ValueError, match="'epilog'"):
        load(None, "epilog")


@pytest.mark.parametrize(
    "text, line, message, hint",
    [
        ("playbok: prolog\n", 1, "unknown key 'playbok'", "did you mean 'playbook'?"),
        (
            "retries: 1\nhealth:\n  playbook: health\n  drain_onn: [fail]\n",
            4,
            "unknown key 'health.drain_onn'",
            "did you mean 'drain_on'?",
        ),
        ("prologg: {playbook: prolog}\n", 1, "unknown key 'prologg'", "did you mean 'prolog'?"),
        (
            "health:\n  drain_on: [fail, error]\n",
            2,
            "health.drain_on.1: Input should be 'fail', 'timeout' or 'unreachable', got 'error'",
            "",
        ),
        ("retries: 11\n", 1, "retries: Input should be less than or equal to 10, got 11", ""),
        ('controller:\n  retries: "2"\n', 2, "controller.retries: Input should be a valid integer, got '2'", ""),
        ("prolog:\n  deadline: 0\n", 2, "prolog.deadline: Input should be greater than 0, got 0", ""),
        ("drain_on: []\n", 1, "drain_on: List should have at least 1 item after validation, not 0", ""),
    ],
)
def test_a_bad_key_or_value_names_file_and_line(tmp_path, text, line, message, hint):
    path = write(tmp_path / "nodecheck.yml", text)
    with pytest.raises(ConfigError) as caught:
        load(path, "health")
    e = caught.value
    assert (e.file, e.line, e.message, e.hint) == (str(path), line, message, hint)
    assert str(e).startswith(f"{path}:{line}: ")


def test_the_drain_token_is_a_short_word(tmp_path):
    assert load(write(tmp_path / "a.yml", "drain_token: site-7.b_2\n"), "health")[0].drain_token == "site-7.b_2"
    with pytest.raises(ConfigError) as caught:
        load(write(tmp_path / "b.yml", "drain_token: 'has space'\n"), "sweep")
    assert (caught.value.line, caught.value.message.split(":")[0]) == (1, "drain_token")


def test_a_list_is_not_a_config(tmp_path):
    path = write(tmp_path / "nodecheck.yml", "- prolog\n- health\n")
    with pytest.raises(ConfigError) as caught:
        load(path, "prolog")
    assert (caught.value.line, caught.value.message) == (1, "a gate config is a mapping of options")


def test_bad_yaml_names_its_line(tmp_path):
    path = write(tmp_path / "nodecheck.yml", "prolog:\n  playbook: prolog\n deadline: 20\n")
    with pytest.raises(ConfigError) as caught:
        load(path, "prolog")
    assert caught.value.file == str(path) and caught.value.line == 3


# ---- apply: the command line wins ---------------------------------------------------------------


def args(**given) -> Namespace:
    base = dict(
        playbook=None,
        inventory=None,
        deadline=None,
        output_dir=None,
        log_file=None,
        observe=None,
        retries=None,
        drain_on=None,
        fanout=None,
        connect_timeout=None,
        accept_new_host_keys=False,
    )
    return Namespace(**{**base, **given})


def test_apply_fills_only_what_the_command_line_left_unset():
    options = GateOptions(
        playbook="prolog",
        deadline=20.0,
        retries=3,
        drain_on=["fail", "timeout"],
        observe=True,
        accept_new_host_keys=True,
        output_dir="/var/lib/nodecheck/reports",
        scontrol="/opt/slurm/bin/scontrol",
    )
    out = apply(args(playbook="mine.yml", deadline=5.0), options)
    assert (
        out.playbook,
        out.deadline,
        out.retries,
        out.drain_on,
        out.observe,
        out.accept_new_host_keys,
        out.output_dir,
        out.scontrol,
    ) == ("mine.yml", 5.0, 3, ("fail", "timeout"), True, True, "/var/lib/nodecheck/reports", "/opt/slurm/bin/scontrol")
    assert out.inventory is None and out.fanout is None  # unset in both: stays None


def test_a_zero_on_the_command_line_is_not_unset():
    # `--retries 0` means "no retry", and must beat the file's retries: 3 (0 == False in Python)
    out = apply(args(retries=0), GateOptions(retries=3))
    assert out.retries == 0
    out = apply(args(drain_on=("fail",), observe=True), GateOptions(drain_on=["timeout"], observe=False))
    assert (out.drain_on, out.observe) == (("fail",), True)


def test_apply_with_the_defaults_changes_nothing():
    before = args(retries=2)
    assert vars(apply(args(retries=2), GateOptions())) == vars(before)


def test_a_top_level_inventory_is_the_controllers_only(tmp_path):
    cfg = tmp_path / "nodecheck.yml"
    cfg.write_text("inventory: /etc/nodecheck/hosts.yml\nhealth: {playbook: health}\n")
    assert gateconfig.load(cfg, "controller")[0].inventory == "/etc/nodecheck/hosts.yml"
    assert gateconfig.load(cfg, "health")[0].inventory is None
    assert gateconfig.load(cfg, "prolog")[0].inventory is None
    cfg.write_text("health: {inventory: /etc/nodecheck/hosts.yml}\n")
    assert gateconfig.load(cfg, "health")[0].inventory == "/etc/nodecheck/hosts.yml"
