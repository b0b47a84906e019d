"""How NCCL and PyTorch read their environment variables (nodecheck.ncclvars); how the nccl.env check
uses these readings is tested in tests/checks/test_nccl_env.py."""
from __future__ import annotations

import pytest

from nodecheck.ncclvars import parse_nccl_list


@pytest.mark.parametrize("value, exclude, exact, entries", [
    ("mlx5_0:1,mlx5_1", False, False, (("mlx5_0", 1), ("mlx5_1", None))),
    ("^=docker0,lo", True, True, (("docker0", None), ("lo", None))),
    ("=eth0,,eth1:", False, True, (("eth0", None), ("eth1", 0))),     # empty entries skipped; atoi("") = 0
    ("eth0, eth1", False, False, (("eth0", None), (" eth1", None))),   # NCCL trims nothing
])
def test_nccl_list_syntax_is_read_as_parseStringList_does(value, exclude, exact, entries):
    spec = parse_nccl_list(value)
    assert (spec.exclude, spec.exact, spec.entries) == (exclude, exact, entries)
