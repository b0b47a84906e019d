"""What a "which tools are here" step prints: one `@@nodecheck have TOOL PATH` or `@@nodecheck
missing TOOL` line per tool (nccl.allreduce_multi's nccl_tools probe). Pure."""

from __future__ import annotations


def missing_tools(stdout: str) -> list[str]:
    """The tools the step did not find, in the order it listed them."""
    return [line.split()[2] for line in stdout.splitlines() if line.startswith("@@nodecheck missing ")]
