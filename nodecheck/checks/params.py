"""Parameter types several checks share."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from nodecheck.probes.pairtest import ARGUMENT


def is_device_name(name: str) -> bool:
    """An HCA or netdev name that may reach a node's shell as an argument: mlx5_0, ens7f0np0."""
    return bool(ARGUMENT.match(name))


def _device_name(name: str) -> str:
    if not is_device_name(name):
        raise ValueError(f"{name!r} is not a device name like mlx5_0")
    return name


DeviceName = Annotated[str, AfterValidator(_device_name)]
