"""How NCCL and PyTorch read their environment variables (nodecheck.judging.nccl_settings); how the nccl.env check
uses these readings is tested in tests/checks/test_nccl_env.py."""

from __future__ import annotations

import pytest

from nodecheck.judging.nccl_settings import parse_nccl_list


@pytest.mark.parametrize(
    "value, exclude, exact, entries",
    [
        ("mlx5_0:1,mlx5_1", False, False, (("mlx5_0", 1), ("mlx5_1", None))),
        ("^=docker0,lo", True, True, (("docker0", None), ("lo", None))),
        ("=eth0,,eth1:", False, True, (("eth0", None), ("eth1", 0))),  # empty entries skipped; atoi("") = 0
        ("eth0, eth1", False, False, (("eth0", None), (" eth1", None))),  # NCCL trims nothing
    ],
)
def test_nccl_list_syntax_is_read_as_parseStringList_does(value, exclude, exact, entries):
    spec = parse_nccl_list(value)
    assert (spec.exclude, spec.exact, spec.entries) == (exclude, exact, entries)


def test_a_message_names_a_secret_but_never_shows_its_value():
    from nodecheck.core.redact import REDACTED
    from nodecheck.judging.nccl_settings import Setting, said

    env = {
        "NCCL_SOCKET_IFNAME": Setting("ib0", "job environment"),
        "TORCH_HUB_TOKEN": Setting("s3cr3t", "job environment"),
        "MASTER_ADDR": Setting("https://alice:s3cr3t@host", "node environment"),
    }
    assert said(env, "NCCL_SOCKET_IFNAME") == "NCCL_SOCKET_IFNAME=ib0 (job environment)"
    assert said(env, "TORCH_HUB_TOKEN") == f"TORCH_HUB_TOKEN={REDACTED} (job environment)"
    assert said(env, "MASTER_ADDR") == "MASTER_ADDR=https://***@host (node environment)"
