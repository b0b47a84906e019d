"""nodecheck.app.slurm against a fake scontrol: exact argv, the drain etiquette, timeouts, reasons, hostlists."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from nodecheck.app.slurm import (
    MAX_REASON_CHARS,
    Change,
    Slurm,
    SlurmError,
    drain_politely,
    drain_reason,
    is_ours,
    resume_politely,
)
from nodecheck.core.errors import ConfigError
from nodecheck.core.hostlist import expand
from nodecheck.parsers.slurm import parse_show_node
from tests.fakes import scontrol as fake_scontrol
from tests.helpers import data, marked_reason

M = marked_reason  # the reason nodecheck writes for a body


REASON = M("gpu.health GPU3 (00000000:9B:00.0): 2 uncorrectable ECC errors, expected 0")
STAMP = "2026-11-29T14:02:03"  # the fake's clock: every reason it sets has this stamp


def _node(state: str, reason: str = "", user: str = "root", time: str = "2026-11-28T22:10:05") -> dict:
    return {"state": state, "reason": reason, "user": user if reason else "", "time": time if reason else ""}


class Fake:
    """The fake scontrol (tests/fakes/scontrol.py) in a directory, its node states and the argv it was
    called with."""

    def __init__(self, root: Path, nodes: dict[str, dict]) -> None:
        self.root = root
        self.script = fake_scontrol.install(root, nodes, clock=STAMP)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "SLURM_TIME_FORMAT": "relative",
        }  # the caller's setting must not reach scontrol
        self.slurm = Slurm(scontrol=str(self.script), timeout_s=20.0, env=env)

    def calls(self) -> list[list[str]]:
        return [call["argv"] for call in fake_scontrol.calls(self.root)]

    def state(self, name: str) -> dict:
        return json.loads((self.root / "nodes.json").read_text(encoding="utf-8"))[name]


@pytest.fixture
def fake(tmp_path):
    return Fake(
        tmp_path,
        {
            "gpu001": _node("IDLE"),
            "gpu002": _node("MIXED+DRAIN", M("gpu.health GPU1 Xid 79"), time="2026-11-29T09:00:00"),
            "gpu003": _node("DOWN+NOT_RESPONDING", "Not responding", user="slurm", time="2026-11-29T13:41:52"),
            "gpu004": _node("IDLE+DRAIN", "RMA ticket 4411: replace GPU 5", user="alice"),
            "gpu005": _node("DOWN+DRAIN+NOT_RESPONDING", M("ib.port mlx5_0 Down, expected Active")),
            "gpu006": _node("IDLE+DRAIN"),  # drained with no reason recorded
            "gpu007": _node("ALLOCATED"),
        },
    )


# -- Slurm: argv, parsing, errors ------------------------------------------------------------------


def test_nodes_reads_every_node_with_one_show_node(fake):
    states = fake.slurm.nodes()
    assert list(states) == ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005", "gpu006", "gpu007"]
    assert fake.calls() == [["show", "node"]]
    assert (states["gpu002"].state, states["gpu002"].reason, states["gpu002"].reason_time) == (
        "MIXED+DRAIN",
        M("gpu.health GPU1 Xid 79"),
        "2026-11-29T09:00:00",
    )
    assert states["gpu003"].not_responding and states["gpu003"].reason_user == "slurm"


def test_nodes_names_joined_by_comma_in_one_argument(fake):
    states = fake.slurm.nodes(["gpu004", "gpu001"])
    assert list(states) == ["gpu004", "gpu001"]
    assert fake.calls() == [["show", "node", "gpu004,gpu001"]]


def test_scontrol_runs_with_standard_time_format(fake):
    fake.slurm.nodes(["gpu001"])
    assert [call["SLURM_TIME_FORMAT"] for call in fake_scontrol.calls(fake.root)] == ["standard"]


def test_drain_passes_the_reason_as_one_argument(fake):
    fake.slurm.drain("gpu001", REASON)
    assert fake.calls() == [["update", "NodeName=gpu001", "State=DRAIN", f"Reason={REASON}"]]
    assert fake.state("gpu001") == {"state": "IDLE+DRAIN", "reason": REASON, "user": "root", "time": STAMP}


def test_resume_argv(fake):
    fake.slurm.resume("gpu002")
    assert fake.calls() == [["update", "NodeName=gpu002", "State=RESUME"]]
    assert fake.state("gpu002")["state"] == "MIXED"


def test_nonzero_exit_is_slurm_error_with_command_rc_and_stderr(fake):
    with pytest.raises(SlurmError) as e:
        fake.slurm.drain("nosuch", REASON)
    assert str(e.value) == (
        f"{fake.script} update NodeName=nosuch State=DRAIN "
        f"'Reason={REASON}': exit 1: slurm_update error: Invalid node name specified"
    )
    assert (e.value.returncode, e.value.stderr) == (1, "slurm_update error: Invalid node name specified\n")


def test_not_found_on_stdout_is_quoted_when_stderr_is_empty(fake):
    with pytest.raises(SlurmError) as e:
        fake.slurm.nodes(["gpu404"])
    assert str(e.value).endswith(" show node gpu404: exit 1: Node gpu404 not found")


def test_unreadable_output_is_slurm_error_from_parse_error(tmp_path):
    script = tmp_path / "scontrol"
    script.write_text("#!/bin/sh\necho 'Node data as of now'\n", encoding="utf-8")
    script.chmod(0o755)
    with pytest.raises(SlurmError) as e:
        Slurm(str(script)).nodes()
    assert str(e.value) == (
        f"{script} show node: scontrol show node: expected a line like NodeName=<name> ..., got 'Node data as of now'"
    )
    assert type(e.value.__cause__).__name__ == "ParseError"


def test_missing_scontrol_is_slurm_error(tmp_path):
    missing = tmp_path / "no" / "scontrol"
    with pytest.raises(SlurmError) as e:
        Slurm(str(missing)).nodes()
    assert str(e.value) == f"{missing} show node: cannot run '{missing}': No such file or directory"


def test_missing_scontrol_on_path_is_slurm_error():
    with pytest.raises(SlurmError) as e:
        Slurm("scontrol", env={"PATH": "/nonexistent"}).nodes(["gpu001"])
    assert "cannot run 'scontrol'" in str(e.value)


def test_hanging_scontrol_is_killed_at_the_timeout(tmp_path):
    script = tmp_path / "scontrol"
    # a shell that waits on a child: the whole process group must die, not only the shell
    script.write_text("#!/bin/sh\necho 'slurm_load_node: waiting for slurmctld' >&2\nsleep 30\n", encoding="utf-8")
    script.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(SlurmError) as e:
        Slurm(str(script), timeout_s=0.5).nodes()
    assert time.monotonic() - started < 5
    assert str(e.value) == (
        f"{script} show node: no answer within 0.5 s; killed; stderr: 'slurm_load_node: waiting for slurmctld'"
    )


@pytest.mark.parametrize("name", ["gpu[001-002]", "gpu001,gpu002", "gpu001 State=DOWN", "", "a=b"])
def test_drain_and_resume_refuse_anything_but_one_node_name(fake, name):
    with pytest.raises(SlurmError, match="not one node name"):
        fake.slurm.drain(name, REASON)
    with pytest.raises(SlurmError, match="not one node name"):
        fake.slurm.resume(name)
    assert fake.calls() == []


def test_fake_prints_what_the_parser_reads_like_the_recorded_22_05_block(fake):
    # the fake and the constructed 22.05 file share the layout: same fields for an idle node
    recorded = parse_show_node(data("slurm/constructed-scontrol-show-node-22.05-idle-no-reason.txt"))["gpu001"]
    assert fake.slurm.nodes(["gpu001"])["gpu001"] == recorded


# -- drain_politely --------------------------------------------------------------------------------


def test_idle_node_is_drained_after_a_fresh_read(fake):
    change = drain_politely(fake.slurm, "gpu001", REASON)
    assert (change.node, change.action, change.reason) == ("gpu001", "drain", REASON)
    assert change.before.state == "IDLE"
    assert fake.calls() == [
        ["show", "node", "gpu001"],
        ["update", "NodeName=gpu001", "State=DRAIN", f"Reason={REASON}"],
    ]
    assert fake.state("gpu001")["state"] == "IDLE+DRAIN"


def test_our_drain_gets_the_new_reason(fake):
    change = drain_politely(fake.slurm, "gpu002", REASON)
    assert (change.action, change.reason, change.before.reason) == ("drain", REASON, M("gpu.health GPU1 Xid 79"))
    assert fake.state("gpu002") == {"state": "MIXED+DRAIN", "reason": REASON, "user": "root", "time": STAMP}


def test_our_drain_for_the_same_reason_is_kept_without_an_update(fake):
    """Every health run and sweep finds its own drain again: no scontrol update, so the reason's
    time still says since when (and the Prolog's breaker does not count it as fresh)."""
    same = M("gpu.health GPU1 Xid 79")
    change = drain_politely(fake.slurm, "gpu002", same)
    assert (change.action, change.reason) == ("kept", same)
    assert fake.calls() == [["show", "node", "gpu002"]]
    assert fake.state("gpu002")["reason"] == same


def test_foreign_drain_is_left_untouched_and_quoted(fake):
    change = drain_politely(fake.slurm, "gpu004", REASON)
    assert change == Change(
        "gpu004",
        "left",
        "already IDLE+DRAIN, reason 'RMA ticket 4411: replace GPU 5' "
        "(set by alice at 2026-11-28T22:10:05); not nodecheck's to change",
        change.before,
    )
    assert fake.calls() == [["show", "node", "gpu004"]]
    assert fake.state("gpu004")["reason"] == "RMA ticket 4411: replace GPU 5"


def test_down_not_responding_is_left(fake):
    change = drain_politely(fake.slurm, "gpu003", REASON)
    assert (change.action, change.reason) == (
        "left",
        "already DOWN+NOT_RESPONDING, reason 'Not responding' (set by slurm at 2026-11-29T13:41:52); "
        "not nodecheck's to change",
    )
    assert fake.calls() == [["show", "node", "gpu003"]]


def test_drained_without_a_reason_is_not_ours_either(fake):
    change = drain_politely(fake.slurm, "gpu006", REASON)
    assert (change.action, change.reason) == ("left", "already IDLE+DRAIN, with no reason; not nodecheck's to change")


def test_drain_of_an_unknown_node_fails_without_update(fake):
    change = drain_politely(fake.slurm, "gpu404", REASON)
    assert (change.action, change.before) == ("failed", None)
    assert change.reason.startswith("cannot read its state: ") and change.reason.endswith(
        "show node gpu404: exit 1: Node gpu404 not found"
    )
    assert fake.calls() == [["show", "node", "gpu404"]]


def test_drain_that_scontrol_refuses_is_failed_with_the_state_read(fake):
    change = drain_politely(fake.slurm, "gpu001", "")  # scontrol: a drain needs a reason
    assert change.action == "failed" and change.before.state == "IDLE"
    assert change.reason.endswith("exit 1: You must specify a reason when DOWNING or DRAINING a node. Request denied")


def test_drain_politely_with_missing_scontrol_fails(tmp_path):
    change = drain_politely(Slurm(str(tmp_path / "scontrol")), "gpu001", REASON)
    assert (change.action, change.before) == ("failed", None)
    assert "No such file or directory" in change.reason


# -- resume_politely -------------------------------------------------------------------------------


def test_our_drain_is_resumed(fake):
    change = resume_politely(fake.slurm, "gpu002")
    assert (change.action, change.reason) == ("resume", M("gpu.health GPU1 Xid 79"))
    assert fake.calls() == [["show", "node", "gpu002"], ["update", "NodeName=gpu002", "State=RESUME"]]
    assert fake.state("gpu002") == {"state": "MIXED", "reason": "", "user": "", "time": ""}


def test_foreign_drain_is_never_resumed(fake):
    change = resume_politely(fake.slurm, "gpu004")
    assert (change.action, change.reason) == (
        "left",
        "IDLE+DRAIN, reason 'RMA ticket 4411: replace GPU 5' (set by alice at 2026-11-28T22:10:05); "
        "only nodecheck's drains are resumed",
    )
    assert fake.calls() == [["show", "node", "gpu004"]]
    assert fake.state("gpu004")["state"] == "IDLE+DRAIN"


def test_down_not_responding_is_never_resumed(fake):
    change = resume_politely(fake.slurm, "gpu003")
    assert change.action == "left" and "only nodecheck's drains are resumed" in change.reason
    assert fake.calls() == [["show", "node", "gpu003"]]


def test_down_with_our_reason_is_left_for_a_human(fake):
    change = resume_politely(fake.slurm, "gpu005")
    assert (change.action, change.reason) == (
        "left",
        "DOWN+DRAIN+NOT_RESPONDING: DOWN is not nodecheck's drain; resume it by hand once fixed",
    )
    assert fake.calls() == [["show", "node", "gpu005"]]


@pytest.mark.parametrize(
    "node, why",
    [
        ("gpu001", "not drained (IDLE)"),
        ("gpu007", "not drained (ALLOCATED)"),
        ("gpu006", "IDLE+DRAIN, with no reason; only nodecheck's drains are resumed"),
    ],
)
def test_nodes_not_drained_by_us_are_left(fake, node, why):
    change = resume_politely(fake.slurm, node)
    assert (change.action, change.reason) == ("left", why)
    assert fake.calls() == [["show", "node", node]]


def test_resume_refused_by_scontrol_is_failed(fake):
    # the node vanished from slurm.conf between the read and the update
    slurm = fake.slurm

    class Vanishing(Slurm):
        def resume(self, node):
            raise SlurmError(
                f"scontrol update NodeName={node} State=RESUME: exit 1: "
                "slurm_update error: Invalid node name specified",
                returncode=1,
            )

    vanishing = Vanishing(slurm.scontrol, slurm.timeout_s, slurm.env)
    change = resume_politely(vanishing, "gpu002")
    assert change.action == "failed" and change.before.owner() == "ours"
    assert change.reason == (
        "scontrol update NodeName=gpu002 State=RESUME: exit 1: slurm_update error: Invalid node name specified"
    )


def test_drain_then_resume_round_trip(fake):
    assert drain_politely(fake.slurm, "gpu007", REASON).action == "drain"
    assert fake.slurm.nodes(["gpu007"])["gpu007"].state == "ALLOCATED+DRAIN"
    assert resume_politely(fake.slurm, "gpu007").action == "resume"
    assert fake.state("gpu007") == {"state": "ALLOCATED", "reason": "", "user": "", "time": ""}


def test_multiline_foreign_reason_is_read_whole_and_left(fake):
    fake_nodes = json.loads((fake.root / "nodes.json").read_text(encoding="utf-8"))
    fake_nodes["gpu001"] = _node("IDLE+DRAIN", "RMA 4411\nsee wiki?id=4411", user="bob")
    (fake.root / "nodes.json").write_text(json.dumps(fake_nodes), encoding="utf-8")
    change = drain_politely(fake.slurm, "gpu001", REASON)
    assert change.action == "left" and change.before.reason == "RMA 4411\nsee wiki?id=4411"


# -- drain_reason / is_ours ------------------------------------------------------------------------


def test_drain_reason_is_one_clean_line():
    assert drain_reason("gpu.health", "GPU3\tXid 79\n\n  fell off\r\nthe bus\x1b[31m") == (
        M("gpu.health GPU3 Xid 79 fell off the bus [31m")
    )
    assert drain_reason("ib.port", "mlx5_0\u2028Down\u00a0\u00a0expected\u3000Active") == (
        M("ib.port mlx5_0 Down expected Active")
    )
    assert drain_reason("gpu.health", "") == M("gpu.health")
    # scontrol drops a trailing '"': the reason never ends with one, so what Slurm keeps is what was marked
    assert drain_reason("gpu.health", 'GPU3 "bad"') == M('gpu.health GPU3 "bad')


def test_drain_reason_keeps_non_ascii():
    assert drain_reason("gpu.health", "GPU3 温度 92 °C > 85 °C") == M("gpu.health GPU3 温度 92 °C > 85 °C")


def test_drain_reason_is_cut_with_an_ellipsis():
    reason = drain_reason("nccl.allreduce_multi", "busbw " + "x" * 500)
    assert len(reason) == MAX_REASON_CHARS == 256
    assert reason.startswith("nodecheck[") and reason.endswith("x…") and is_ours(reason)
    assert reason == M("nccl.allreduce_multi busbw " + "x" * (256 - 21 - 27 - 1) + "…")
    short = drain_reason("gpu.health", "GPU3 温度 92 °C too hot", max_chars=40)
    assert short == M("gpu.health GPU3 温度…") and len(short) == 40
    cut_at_space = drain_reason("gpu.health", "GPU3 fell off", max_chars=38)
    assert cut_at_space == M("gpu.health GPU3…") and len(cut_at_space) == 37  # not "GPU3 …"
    assert drain_reason("gpu.health", "GPU3", max_chars=36) == M("gpu.health GPU3")  # fits: uncut


def test_drain_reason_needs_room_after_the_owner():
    assert drain_reason("gpu.health", "x", max_chars=22) == M("…")
    with pytest.raises(ValueError):
        drain_reason("gpu.health", "x", max_chars=21)


def test_is_ours():
    assert is_ours(REASON) and is_ours(drain_reason("a", "b"))
    assert not is_ours("Not responding") and not is_ours("") and not is_ours(" nodecheck: x")
    assert is_ours(drain_reason("a", "b", token="site7"), token="site7")
    assert not is_ours(drain_reason("a", "b", token="site7")) and not is_ours(drain_reason("a", "b"), "site7")


def test_an_operators_nodecheck_style_reason_is_never_resumed(fake):
    """Issue 17, finding 10: an operator's hold in the old "nodecheck:" form is not nodecheck's."""
    rma = "nodecheck: gpu.health GPU3 held for RMA #4711 - do not resume"
    assert not is_ours(rma)
    fake_nodes = json.loads((fake.root / "nodes.json").read_text(encoding="utf-8"))
    fake_nodes["gpu001"] = _node("IDLE+DRAIN", rma, user="alice")
    (fake.root / "nodes.json").write_text(json.dumps(fake_nodes), encoding="utf-8")
    change = resume_politely(fake.slurm, "gpu001")
    assert (change.action, change.reason) == (
        "left",
        f"IDLE+DRAIN, reason {rma!r} (set by alice at 2026-11-28T22:10:05) (an unmarked, old-format "
        "nodecheck reason: anyone could have typed it, so it is resumed by hand); only nodecheck's drains "
        "are resumed",
    )
    # nor is its reason replaced by a failing run's (which would make it nodecheck's to resume later)
    assert drain_politely(fake.slurm, "gpu001", drain_reason("gpu.health", "GPU3 ECC")).action == "left"
    assert fake.state("gpu001")["reason"] == rma
    assert [c[0] for c in fake.calls()] == ["show", "show"]


# -- core.hostlist.expand -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, names",
    [
        ("node[1-4,7]", ["node1", "node2", "node3", "node4", "node7"]),
        ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
        ("gpu010", ["gpu010"]),
        ("gpu[2,1],cpu1", ["cpu1", "gpu1", "gpu2"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ],
)
def test_expand_hostlist(text, names):
    assert expand(text) == names


@pytest.mark.parametrize(
    "text, message",
    [
        ("node[1-", "bad hostlist 'node[1-': missing bracket: \"node[1-\""),
        ("node[3-1]", 'bad hostlist \'node[3-1]\': bad range: "invalid values in range : "3-1""'),
        ("", "empty hostlist ''"),
        ("@gpus", "bad hostlist '@gpus': '@gpus' is not a node name"),
        ("gpu1 gpu2", "bad hostlist 'gpu1 gpu2': 'gpu1 gpu2' is not a node name"),
        ("n[1-1000000]", "hostlist 'n[1-1000000]' names 1,000,000 nodes, more than 100,000"),
    ],
)
def test_expand_hostlist_refuses_bad_text(text, message):
    with pytest.raises(ConfigError) as e:
        expand(text)
    assert e.value.message == message
