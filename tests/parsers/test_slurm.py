"""parse_show_node on every copied `scontrol show node` file (recorded, constructed, derived), exact values."""

from __future__ import annotations

import dataclasses

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.slurm import OLD_OWNER, OWNER, NodeState, parse_show_node, reason_body, reason_mark, reason_owner
from tests.helpers import data, data_files

CN_DOC = "slurm/cn-doc-scontrol-show-node-25.05-idle-drain-unicode-reason-and-sinfo.txt"
CN_DOC_PROMPT = "root@server2:~# sinfo"  # the poster's next command, pasted right after the block
NODECHECK_REASON = "nodecheck: gpu.health GPU3 (00000000:9B:00.0): 2 uncorrectable ECC errors (volatile), expected 0"


def _node(name, state, flags, reason="", user="", time="", not_responding=False) -> NodeState:
    return NodeState(
        name=name,
        state=state,
        flags=frozenset(flags),
        reason=reason,
        reason_user=user,
        reason_time=time,
        not_responding=not_responding,
    )


# (name → NodeState, drained, ours) per node, in output order
SHOW_NODE = {
    "slurm/cn-blog-scontrol-show-node-20.11-idle-drain-low-realmemory.txt": [
        (_node("cu201", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "Low RealMemory", "root", "2022-05-18T17:20:20"), True, False)
    ],
    CN_DOC: [(_node("server5", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "维护中", "root", "2025-09-23T09:46:15"), True, False)],
    "slurm/oxygen-scontrol-show-node-17.11-idle-drain-reason-question-mark-trailing-spaces.txt": [
        (
            _node("oxygen-04", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "memory issues?", "root", "2019-01-29T10:42:12"),
            True,
            False,
        )
    ],
    "slurm/unige-bamboo-scontrol-show-node-25.11-rtx5090-gpu-drained-health-check-no-indent.txt": [
        (
            _node("gpu010", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "health_ps___blocked", "root", "2026-04-29T03:06:18"),
            True,
            False,
        )
    ],
    "slurm/constructed-scontrol-show-node-22.05-idle-no-reason.txt": [
        (_node("gpu001", "IDLE", {"IDLE"}), False, False)
    ],
    "slurm/constructed-scontrol-show-node-22.05-mixed-drain-nodecheck-reason.txt": [
        (
            _node("gpu002", "MIXED+DRAIN", {"MIXED", "DRAIN"}, NODECHECK_REASON, "root", "2026-11-29T14:02:03"),
            True,
            True,
        )
    ],
    "slurm/constructed-scontrol-show-node-22.05-down-not-responding.txt": [
        (
            _node(
                "gpu003",
                "DOWN+NOT_RESPONDING",
                {"DOWN", "NOT_RESPONDING"},
                "Not responding",
                "slurm",
                "2026-11-29T13:41:52",
                not_responding=True,
            ),
            True,
            False,
        )
    ],
    "slurm/constructed-scontrol-show-node-22.05-two-nodes-foreign-drain-and-allocated.txt": [
        (
            _node("gpu004", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "Kill task failed", "root", "2026-11-28T22:10:05"),
            True,
            False,
        ),
        (_node("gpu005", "ALLOCATED", {"ALLOCATED"}), False, False),
    ],
    "slurm/constructed-scontrol-show-node-22.05-multiline-reason.txt": [
        (
            _node(
                "gpu006",
                "IDLE+DRAIN",
                {"IDLE", "DRAIN"},
                "RMA ticket 4411: replace GPU 5\nsee https://wiki.example/rma?id=4411 [not a stamp]",
                "root",
                "2026-11-29T14:02:03",
            ),
            True,
            False,
        )
    ],
    "slurm/derived-cn-blog-scontrol-show-node-20.11-down-star-drain-low-realmemory.txt": [
        (
            _node(
                "cu201",
                "DOWN*+DRAIN",
                {"DOWN", "DRAIN"},
                "Low RealMemory",
                "root",
                "2022-05-18T17:20:20",
                not_responding=True,
            ),
            True,
            False,
        )
    ],
}
# corpus files of other Slurm commands: not this parser's input, so ParseError naming the first line
NOT_SHOW_NODE = {
    "slurm/arjuna-69-sinfo-drng-at-fail-star-maint-states.txt": "'PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST'",
    "slurm/awsome-distributed-ai-185-sinfo-R-kill-task-failed-line.txt": (
        "'Kill task failed root 2024-01-25T15:12:23 ip-10-0-1-23'"
    ),
    "slurm/cn-blog-sinfo-R-4nodes-low-realmemory.txt": "'REASON               USER      TIMESTAMP           NODELIST'",
}


def _text(path: str) -> str:
    text = data(path)
    # the recorded block is followed by the poster's `sinfo` (see test_cn_doc_whole_file_...)
    return text.split(CN_DOC_PROMPT)[0] if path == CN_DOC else text


# -- every file has an exact expectation, and a source line ---------------------------------------


def test_every_slurm_data_file_has_an_expectation():
    assert set(data_files("slurm")) == set(SHOW_NODE) | set(NOT_SHOW_NODE)
    assert len(SHOW_NODE) == 10 and len(NOT_SHOW_NODE) == 3


def test_every_slurm_data_file_has_a_source_line():
    sources = data("SOURCES.md")
    assert all(f"- `{path}` - " in sources for path in data_files("slurm"))


# each node's Partitions= (the remediation budget's max_share is per partition), as the files print them
PARTITIONS = {
    "slurm/cn-blog-scontrol-show-node-20.11-idle-drain-low-realmemory.txt": {"cu201": ("regular",)},
    CN_DOC: {"server5": ("cpu", "memory")},
    "slurm/constructed-scontrol-show-node-22.05-down-not-responding.txt": {"gpu003": ("gpu",)},
    "slurm/constructed-scontrol-show-node-22.05-idle-no-reason.txt": {"gpu001": ("gpu",)},
    "slurm/constructed-scontrol-show-node-22.05-mixed-drain-nodecheck-reason.txt": {"gpu002": ("gpu",)},
    "slurm/constructed-scontrol-show-node-22.05-multiline-reason.txt": {"gpu006": ("gpu",)},
    "slurm/constructed-scontrol-show-node-22.05-two-nodes-foreign-drain-and-allocated.txt": {
        "gpu004": ("gpu",),
        "gpu005": ("gpu",),
    },
    "slurm/derived-cn-blog-scontrol-show-node-20.11-down-star-drain-low-realmemory.txt": {"cu201": ("regular",)},
    "slurm/oxygen-scontrol-show-node-17.11-idle-drain-reason-question-mark-trailing-spaces.txt": {
        "oxygen-04": ("short", "medium", "long", "killable")
    },
    "slurm/unige-bamboo-scontrol-show-node-25.11-rtx5090-gpu-drained-health-check-no-indent.txt": {
        "gpu010": ("private-kalousis-gpu", "shared-gpu")
    },
}


def test_a_partitions_field_that_is_not_a_list_of_names_is_refused():
    text = "NodeName=n1 CoresPerSocket=1\n   State=IDLE ThreadsPerCore=1\n   Partitions=gpu,`reboot` \n"
    with pytest.raises(ParseError, match="is not a partition list"):
        parse_show_node(text)
    text = "NodeName=n1 CoresPerSocket=1\n   State=IDLE ThreadsPerCore=1\n   Partitions=gpu,debug \n"
    assert parse_show_node(text)["n1"].partitions == ("gpu", "debug")


@pytest.mark.parametrize("path", sorted(SHOW_NODE))
def test_show_node_file_gives_exact_states(path):
    states = parse_show_node(_text(path))
    want = SHOW_NODE[path]
    assert list(states) == [node.name for node, _, _ in want]
    parts = PARTITIONS[path]
    assert list(states.values()) == [dataclasses.replace(node, partitions=parts[node.name]) for node, _, _ in want]
    # (o: a nodecheck-style reason; every recorded one is unmarked, old-format: never nodecheck's own)
    assert [(s.drained, s.owner()) for s in states.values()] == [(d, "old" if o else "foreign") for _, d, o in want]


def test_cn_doc_whole_file_is_refused_at_the_pasted_prompt():
    # scontrol never prints a line without Key=; the paste of two commands is not read as one
    with pytest.raises(ParseError) as e:
        parse_show_node(data(CN_DOC))
    assert e.value.reason == "node server5: unexpected line 'root@server2:~# sinfo'"
    assert "维护中" in e.value.excerpt


def test_cn_doc_block_keeps_non_ascii_reason_exactly():
    (state,) = parse_show_node(_text(CN_DOC)).values()
    assert state.reason == "\u7ef4\u62a4\u4e2d" and len(state.reason) == 3


def test_unige_lost_indentation_reads_like_the_indented_blocks():
    text = data("slurm/unige-bamboo-scontrol-show-node-25.11-rtx5090-gpu-drained-health-check-no-indent.txt")
    indented = "\n".join(line if line.startswith("NodeName=") else "   " + line for line in text.splitlines())
    assert parse_show_node(indented) == parse_show_node(text)


def test_two_nodes_keep_output_order_and_a_blank_line_separates_them():
    text = data("slurm/constructed-scontrol-show-node-22.05-two-nodes-foreign-drain-and-allocated.txt")
    assert text.count("\n\nNodeName=") == 1
    assert list(parse_show_node(text)) == ["gpu004", "gpu005"]


def test_owner_is_the_mark_of_the_reasons_text_and_the_sites_token():
    assert (OWNER, OLD_OWNER) == ("nodecheck[", "nodecheck:")
    mark = reason_mark("ib.port mlx5_0 Down")
    assert len(mark) == 8 and mark == reason_mark("ib.port mlx5_0 Down", "")
    ours = f"nodecheck[{mark}]: ib.port mlx5_0 Down"
    assert _node("n1", "IDLE+DRAIN", {"IDLE", "DRAIN"}, ours).owner() == "ours"
    assert reason_owner(ours, token="site-b") == "foreign"  # another site's (or token's) mark
    assert reason_owner(f"nodecheck[{reason_mark('x', 'site-b')}]: x", token="site-b") == "ours"
    # the mark is of the text: an edit (a person copying nodecheck's reason and adding to it) loses it
    assert reason_owner(ours + " - held for RMA", "") == "foreign"
    assert reason_owner(ours.replace("Down", "down"), "") == "foreign"
    assert reason_owner(f"nodecheck[{mark.upper()}]: ib.port mlx5_0 Down") == "foreign"
    assert _node("n1", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "nodecheck: ib.port mlx5_0 Down").owner() == "old"
    assert _node("n1", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "NHC: nodecheck: x").owner() == "foreign"
    assert _node("n1", "IDLE+DRAIN", {"IDLE", "DRAIN"}, "Nodecheck: x").owner() == "foreign"
    assert reason_body(ours) == "ib.port mlx5_0 Down" and reason_body("nodecheck: a b") == "a b"
    assert reason_body("admin: nodecheck: a") == ""


def test_a_reason_slurm_extended_after_a_reboot_stays_ours():
    """Issue 33: slurmctld appends " : reboot issued" to a drained node's reason when it reboots it,
    and keeps it after the node is back (" : reboot timed out" after ResumeTimeout); measured on
    Slurm 22.05.8, tests/harness/README.md "Reboot". nodecheck's reboot must not make its own drain
    a stranger's, and a person's text after the mark still does."""
    body = "gpu.health rebooting: gpu.health GPU3: row remap pending"
    ours = f"nodecheck[{reason_mark(body)}]: {body}"
    for suffix in (" : reboot issued", " : reboot issued : reboot timed out"):
        assert reason_owner(ours + suffix) == "ours"
        assert reason_body(ours + suffix) == body
    assert reason_owner(ours + " : reboot issued - RMA, do not resume") == "foreign"
    assert reason_owner(ours + " : reboot requested") == "foreign"
    assert reason_owner("reboot requested : reboot issued") == "foreign"


@pytest.mark.parametrize(
    "state, flags, drained, not_responding",
    [
        ("IDLE", {"IDLE"}, False, False),
        ("MIXED", {"MIXED"}, False, False),
        ("ALLOCATED+DRAIN", {"ALLOCATED", "DRAIN"}, True, False),
        ("IDLE+FAIL", {"IDLE", "FAIL"}, True, False),
        ("DOWN", {"DOWN"}, True, False),
        ("IDLE+NOT_RESPONDING", {"IDLE", "NOT_RESPONDING"}, False, True),
        ("IDLE*", {"IDLE"}, False, True),
        ("DOWN+DRAIN+NOT_RESPONDING", {"DOWN", "DRAIN", "NOT_RESPONDING"}, True, True),
        ("IDLE+MAINT", {"IDLE", "MAINT"}, False, False),  # a reservation, not a health decision
        ("IDLE+CLOUD+POWERED_DOWN", {"IDLE", "CLOUD", "POWERED_DOWN"}, False, False),
    ],
)
def test_state_words(state, flags, drained, not_responding):
    text = f"NodeName=n1 CoresPerSocket=1 \n   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1\n"
    (node,) = parse_show_node(text).values()
    assert (node.state, node.flags, node.drained, node.not_responding) == (
        state,
        frozenset(flags),
        drained,
        not_responding,
    )
    assert node.reason == ""


@pytest.mark.parametrize(
    "line, reason, user, time",
    [
        ("Reason=a=b [c] [root@2026-11-29T14:02:03]", "a=b [c]", "root", "2026-11-29T14:02:03"),
        ("Reason=bad State=DOWN here [0@2026-11-29T14:02:03]", "bad State=DOWN here", "0", "2026-11-29T14:02:03"),
        ("Reason=x [alice@corp.example@2026-11-29T14:02:03]", "x", "alice@corp.example", "2026-11-29T14:02:03"),
        ("Reason=no stamp recorded", "no stamp recorded", "", ""),
        ("Reason=relative time [root@Tue 14:02]", "relative time [root@Tue 14:02]", "", ""),
        ("Reason=  spaced  [root@2026-11-29T14:02:03]", "  spaced ", "root", "2026-11-29T14:02:03"),
    ],
)
def test_reason_keeps_text_and_strips_only_the_user_time_suffix(line, reason, user, time):
    text = f"NodeName=n1 CoresPerSocket=1 \n   State=IDLE+DRAIN ThreadsPerCore=1\n   {line}\n   Comment=(null)\n"
    (node,) = parse_show_node(text).values()
    assert (node.reason, node.reason_user, node.reason_time) == (reason, user, time)
    assert node.state == "IDLE+DRAIN"  # "State=DOWN" inside the reason is not the state


def test_no_nodes_in_the_system_is_an_empty_cluster():
    assert parse_show_node("No nodes in the system\n") == {}


# -- output that is not scontrol show node: ParseError with an excerpt ------------------------------


@pytest.mark.parametrize("path", sorted(NOT_SHOW_NODE))
def test_other_slurm_outputs_are_refused(path):
    with pytest.raises(ParseError) as e:
        parse_show_node(data(path))
    assert e.value.reason == f"expected a line like NodeName=<name> ..., got {NOT_SHOW_NODE[path]}"
    assert e.value.tool == "scontrol show node"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("\n  \n", "empty output"),
        (
            "slurm_load_node error: Unable to contact slurm controller (connect failure)\n",
            "expected a line like NodeName=<name> ..., got 'slurm_load_node error: Unable to contact slurm "
            "controller (c'… (75 characters)",
        ),
        ("NodeName=n1 CoresPerSocket=1\n   CPUAlloc=0 CPUTot=8\n", "node n1: no State= field (output cut off?)"),
        ("NodeName=n1\n   State=IDLE\n\nNodeName=n1\n   State=IDLE\n", "node n1 appears twice"),
        ("NodeName=n1\n   State=IDLE\n   State=DOWN\n", "node n1: two State= fields"),
        ("NodeName=n1\n   State=idle\n", "node n1: State=idle is not a Slurm state"),
        ("NodeName=n1\n   State=IDLE\n   Reason=a\n   Reason=b\n", "node n1: two Reason= lines"),
        (
            "NodeName=n1\n   State=IDLE+DRAIN\n   Reason=a\n   lost continuation\n",
            "node n1: unexpected line 'lost continuation'",
        ),
    ],
)
def test_garbage_raises_parse_error(text, reason):
    with pytest.raises(ParseError) as e:
        parse_show_node(text)
    assert e.value.reason == reason


def test_cut_block_excerpt_starts_at_the_cut_node():
    good = data("slurm/constructed-scontrol-show-node-22.05-idle-no-reason.txt")
    with pytest.raises(ParseError) as e:
        parse_show_node(good + "NodeName=gpu009 Arch=x86_64 CoresPerSocket=32 \n   CPUAlloc=0 CPUEf")
    assert e.value.reason == "node gpu009: no State= field (output cut off?)"
    assert e.value.excerpt.startswith("NodeName=gpu009 ")
