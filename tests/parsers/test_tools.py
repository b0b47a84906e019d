"""The "which tools are here" step's lines (nccl.allreduce_multi's nccl_tools probe)."""

from __future__ import annotations

from nodecheck.parsers.tools import UNNAMED, missing_tools


def test_the_missing_tools_in_the_order_listed():
    text = "@@nodecheck have srun /usr/bin/srun\n@@nodecheck missing mpirun\n@@nodecheck missing all_gather_perf\n"
    assert missing_tools(text) == ["mpirun", "all_gather_perf"]


def test_a_missing_line_cut_before_its_name_still_says_a_tool_is_missing():
    # issue 32 fuzzing: this raised IndexError ("internal error"); read as nothing missing, the node
    # would join a test it cannot run
    text = "@@nodecheck have all_reduce_perf /opt/nccl-tests/build/all_reduce_perf\n@@nodecheck missing "
    assert missing_tools(text) == [UNNAMED]
