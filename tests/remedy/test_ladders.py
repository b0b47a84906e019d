"""Ladder files (nodecheck.config.remedy): the shipped profile, and bad files named by file and line."""

from __future__ import annotations

import os
import re

import pytest

from nodecheck.config.remedy import ACTIONS, Step, known_check_names, load_ladders, shipped_path
from nodecheck.core.errors import ConfigError

KNOWN = ["gpu.health", "gpu.xid", "services"]


def load(tmp_path, text: str, known=KNOWN):
    path = tmp_path / "ladders.yml"
    path.write_text(text, encoding="utf-8")
    return load_ladders(path, known)


def test_the_shipped_profile_loads_and_every_ladder_names_a_real_check_and_a_source():
    ladders = load_ladders(None, known_check_names())
    assert ladders.file == str(shipped_path())
    assert len(ladders.ladders) >= 10
    assert all(lad.source for lad in ladders.ladders)
    assert ladders.otherwise == (Step(action="hold"),)
    # every ladder ends with a person: nothing is retried for ever
    assert all(lad.steps[-1].action == "hold" for lad in ladders.ladders)
    # every source tag a ladder cites is defined in the file's header
    text = shipped_path().read_text(encoding="utf-8")
    defined = set(re.findall(r"^# (\[[A-Z]+\])", text, re.M))
    cited = {tag for lad in ladders.ladders for tag in re.findall(r"\[[A-Z]+\]", lad.source)}
    assert cited and cited <= defined


@pytest.mark.parametrize(
    ("check", "observed", "ladder"),
    [
        ("gpu.health", {"remap_pending": True, "remap_failure": False}, "gpu-row-remap-pending"),
        ("gpu.health", {"remap_pending": True, "remap_failure": True}, "gpu-row-remap-failure"),
        ("gpu.xid", {"xid": 48, "pci": "0000:3b:00"}, "xid-gpu-memory"),
        ("gpu.xid", {"xid": 79}, "xid-fallen-off-the-bus"),
        ("gpu.xid", {"xid": 13}, None),
        (
            "services",
            {"nvidia-fabricmanager.service": "failed", "down": ["nvidia-fabricmanager.service"]},
            "fabric-manager-down",
        ),
        ("nvlink.fabric", {"active_state": "inactive", "running": False}, "fabric-manager-not-running"),
        ("kernel.version", {"kernel": "6.8"}, None),
    ],
)
def test_the_shipped_profile_picks_the_ladder_for_each_cause(check, observed, ladder):
    found = load_ladders(None, known_check_names()).for_failure(check, observed)
    assert (found.name if found else None) == ladder


def test_a_value_must_match_in_kind_too(tmp_path):
    ladders = load(tmp_path, "ladders:\n  - {name: a, check: gpu.xid, when: {xid: [48]}, steps: [reset_gpu, hold]}\n")
    assert ladders.for_failure("gpu.xid", {"xid": 48}) is not None
    assert ladders.for_failure("gpu.xid", {"xid": "48"}) is None
    assert ladders.for_failure("gpu.xid", {}) is None  # a key the verdict did not observe never matches


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("ladders:\n  - name: a\n    check: gpu.xidd\n    steps: [hold]\n", 3, "ladder 'a': unknown check 'gpu.xidd'"),
        (
            "ladders:\n  - name: a\n    check: gpu.xid\n    steps: [reset_gpu, reebot]\n",
            4,
            "Input should be 'reset_gpu', 'restart_service', 'reboot' or 'hold', got 'reebot'",
        ),
        (
            "ladders:\n  - name: a\n    check: gpu.xid\n    steps: [restart_service]\n",
            4,
            "restart_service names its unit",
        ),
        (
            "ladders:\n  - name: a\n    check: gpu.xid\n    steps: [{restart_service: '-x;reboot'}]\n",
            4,
            "String should match pattern",
        ),
        ("ladders:\n  - name: a\n    check: gpu.xid\n    steps: [hold, reboot]\n", 4, "hold ends a ladder"),
        ("ladders:\n  - name: a\n    check: gpu.xid\n    steps: []\n", 4, "at least 1 item"),
        (
            "ladders:\n  - {name: a, check: gpu.xid, steps: [hold]}\n  - {name: a, check: gpu.xid, steps: [hold]}\n",
            3,
            "named twice",
        ),
        ("ladders:\n  - name: a\n    check: gpu.xid\n    stepz: [hold]\n", 4, "unknown key 'ladders.0.stepz'"),
        ("ladders:\n  - name: a\n    check: gpu.xid\n    steps: [hold]\n    again_within_h: .nan\n", 5, "finite"),
        ("- just a list\n", 1, "a ladder file is a mapping"),
        (
            "memory:\n  - name: m\n    counter: LinkDowned\n    rises: 3\n    within_h: 24\n",
            3,
            "'LinkDowned' is not a counter the sweep history keeps; did you mean 'LinkDownedCounter'?",
        ),
        (
            "memory:\n  - name: m\n    drains: 3\n    counter: LinkDownedCounter\n    within_h: 24\n",
            2,
            "a memory rule counts either drains (drains: 3) or a counter's rises",
        ),
        ("memory:\n  - name: m\n    within_h: 24\n", 2, "a memory rule counts either drains"),
        ("memory:\n  - {name: m, counter: crc_flit, within_h: 24}\n", 2, "in how many sweeps it must rise"),
        ("memory:\n  - {name: m, drains: 1, within_h: 24}\n", 2, "greater than or equal to 2"),
        ("memory:\n  - {name: m, drains: 3}\n", 2, "within_h"),
        (
            "memory:\n  - {name: m, drains: 3, within_h: 1}\n  - {name: m, drains: 4, within_h: 2}\n",
            3,
            "memory rule 'm' is named twice",
        ),
    ],
)
def test_a_bad_ladder_file_names_the_file_and_line(tmp_path, text, line, message):
    with pytest.raises(ConfigError) as e:
        load(tmp_path, text)
    assert e.value.file == str(tmp_path / "ladders.yml")
    assert e.value.line == line
    assert message in str(e.value)


def test_the_shipped_memory_rules_are_the_issues_each_with_a_defined_source():
    ladders = load_ladders(None, known_check_names())
    said = {rule.name: rule.said for rule in ladders.memory}
    assert said == {
        "drained-three-times-a-week": "drained 3 times within 7 days",
        "ib-link-flapping": "LinkDownedCounter rose in 3 sweeps within 24 h",
    }
    defined = set(re.findall(r"^# (\[[A-Z]+\])", shipped_path().read_text(encoding="utf-8"), re.M))
    for rule in ladders.memory:
        cited = set(re.findall(r"\[[A-Z]+\]", rule.source))
        assert cited and cited <= defined, rule.name


def test_every_action_is_a_step_kind():
    assert ACTIONS == ("reset_gpu", "restart_service", "reboot", "hold")


@pytest.mark.parametrize(
    ("uid", "mode", "why"),
    [(0, 0o664, "writable by group"), (0, 0o646, "writable by others"), (4242, 0o644, "owned by uid 4242")],
)
def test_a_ladder_file_that_is_not_roots_word_is_refused(tmp_path, uid, mode, why):
    """Its steps are what root does to nodes: a file another user can write must not choose them."""
    path = tmp_path / "ladders.yml"
    path.write_text("ladders:\n  - {name: a, check: gpu.xid, steps: [reboot, hold]}\n")
    os.chown(path, uid, -1)
    path.chmod(mode)
    with pytest.raises(ConfigError) as e:
        load_ladders(path, KNOWN)
    assert e.value.file == str(path)
    assert f"a ladder file says what root does to nodes, so it must be root's word; this one is {why}" in str(e.value)
    path.chmod(0o644)
    os.chown(path, 0, -1)
    assert load_ladders(path, KNOWN).ladders[0].name == "a"
