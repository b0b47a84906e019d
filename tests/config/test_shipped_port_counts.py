"""Every shipped playbook that checks IB ports knows how many to expect (issue 32, section 3): without
a count, an ibstat cut at a CA boundary or a node that lost HCAs passes on the ports that are left."""

from __future__ import annotations

import pytest
import yaml

from nodecheck.config.playbook import SHIPPED, load_playbook

# the hardware profiles state their node's exact count (PROFILES.md); the generic playbooks, written
# for any fleet, take the count a strict majority of the run's nodes show
PROFILE_PORTS = {
    "a100-sxm4-80gb-8": 8,
    "b200-8": 8,
    "demo": 8,
    "gb300-nvl72": 4,
    "h100-sxm-8": 8,
    "h200-sxm-8": 8,
}


def with_ib_ports() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.yml") if "ib.ports" in (yaml.safe_load(p.read_text())["checks"]))


def test_the_list_is_not_empty():
    assert {"default", "fabric", "acceptance", "h100-sxm-8"} <= set(with_ib_ports())


@pytest.mark.parametrize("name", with_ib_ports())
def test_every_shipped_ib_ports_has_an_expected_count(name):
    [check] = [c for c in load_playbook(name).checks if c.spec.name == "ib.ports"]
    expected = check.params.expected_ports
    assert expected == PROFILE_PORTS.get(name, "fleet"), f"{name}: ib.ports expected_ports is {expected!r}"
