"""`nodecheck facts` / `baseline` read every value check with that check's own params: a check whose
params add to PinOrDrift (kernel.cmdline's `ignore`) gets its defaults, not a bare PinOrDrift."""

from __future__ import annotations

import pytest

from nodecheck.checks.kernel_cmdline import CmdlineDrift
from nodecheck.checks.values import value_checks
from nodecheck.core.model import Capture, Outcome
from nodecheck.judging.drift import PinOrDrift
from nodecheck.run.facts import Gathered, read_value, value_params


def test_kernel_cmdline_is_read_with_its_own_defaults():
    params = value_params("kernel.cmdline", None)
    assert isinstance(params, CmdlineDrift)
    assert "BOOT_IMAGE" in params.ignore


@pytest.mark.parametrize("name", sorted(n for n in value_checks() if n != "container.digest"))
def test_every_value_check_gets_params_of_its_own_type(name):
    assert isinstance(value_params(name, None), value_checks()[name].params)
    assert issubclass(value_checks()[name].params, PinOrDrift)


def test_facts_read_the_kernel_command_line_without_the_per_node_parameters():
    [probe] = value_checks()["kernel.cmdline"].probes(value_params("kernel.cmdline", None))
    line = "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=1234 ro iommu=pt quiet\n"
    out = f"@@nodecheck begin cmdline\n{line}@@nodecheck end cmdline rc=0\n"  # the probe's sections
    capture = Capture("n1", probe.name, probe.argv, Outcome.EXITED, 0, out, "", 0.1)
    gathered = Gathered(("n1",), {("n1", probe.name): capture}, ("kernel.cmdline",), None, "")
    value, why = read_value(gathered, "n1", "kernel.cmdline")
    assert why is None
    assert value == "ro iommu=pt quiet"
