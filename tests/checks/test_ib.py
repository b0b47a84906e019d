"""ib.ports judged on real ibstat captures (and two derived scenarios): exact statuses, subjects, messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks import all_checks
from nodecheck.checks.ib import IBSTAT, IbPorts, ports
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict
from tests.helpers import captures, data

PASS, FAIL, ERROR = Status.PASS, Status.FAIL, Status.ERROR
H100_NDR = "ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt"
H100_DOWN = "ibstat/derived-h100-ndr-mlx5_3-down-polling.txt"
H100_RATE = "ibstat/derived-h100-ndr-mlx5_5-rate-200.txt"
H100_ROCE = "ibstat/gpud-h100-cx7-roce-12ca-down-polling-disabled.txt"
LUSTRE_CUT = "ibstat/lustreperfmon-27-cx6-hdr-ib-active-and-disabled-truncated.txt"
VF_DOWN_LINKUP = "ibstat/network-operator-249-cx6-vf-down-linkup-lid65535.txt"
CX3_VPI = "ibstat/linux-rdma-ml-mlx4-connectx3-ib-down-polling-eth-disabled.txt"
NDR_IB = ["mlx5_0/1", "mlx5_10/1", "mlx5_11/1", "mlx5_3/1", "mlx5_4/1", "mlx5_5/1", "mlx5_6/1", "mlx5_9/1"]
NDR = {"expected_ports": 8, "min_rate_gbps": 400}


def judge(path: str, **params: object) -> list[Verdict]:
    return list(ports(captures(IBSTAT, data(path)), IbPorts(**params)))


def by_status(verdicts: list[Verdict], status: Status) -> list[Verdict]:
    return [v for v in verdicts if v.status is status]


def test_healthy_h100_ndr_passes_all_eight_ib_ports():
    verdicts = judge(H100_NDR, **NDR)
    assert [v.status for v in verdicts] == [PASS] * 8
    assert [v.subject for v in verdicts] == NDR_IB
    assert verdicts[0].message == "mlx5_0/1: Active/LinkUp, 400 Gb/s"
    assert verdicts[0].observed == {"state": "Active", "physical_state": "LinkUp", "rate_gbps": 400.0}
    assert verdicts[0].expected == {"state": "Active", "physical_state": "LinkUp", "min_rate_gbps": 400}


def test_one_port_down_fails_only_that_port():
    verdicts = judge(H100_DOWN, **NDR)
    assert len(verdicts) == 8
    (fail,) = by_status(verdicts, FAIL)
    assert fail.subject == "mlx5_3/1"
    assert fail.message == "mlx5_3/1: Down/Polling, expected Active/LinkUp"
    assert fail.observed == {"state": "Down", "physical_state": "Polling", "rate_gbps": 400.0}
    assert fail.expected == {"state": "Active", "physical_state": "LinkUp"}
    assert fail.excerpt.splitlines()[:3] == ["CA 'mlx5_3'", "\tPort 1:", "\t\tState: Down"]
    assert len(by_status(verdicts, PASS)) == 7


def test_one_port_at_lower_rate_fails_on_rate():
    verdicts = judge(H100_RATE, **NDR)
    assert len(verdicts) == 8
    (fail,) = by_status(verdicts, FAIL)
    assert fail.subject == "mlx5_5/1"
    assert fail.message == "mlx5_5/1 rate 200 Gb/s, expected >= 400 Gb/s"
    assert fail.observed["rate_gbps"] == 200.0
    assert fail.expected["min_rate_gbps"] == 400
    assert "\t\tRate: 200" in fail.excerpt.splitlines()
    assert len(by_status(verdicts, PASS)) == 7


def test_rate_is_reported_but_not_judged_without_a_minimum():
    verdicts = judge(H100_RATE)
    assert [v.status for v in verdicts] == [PASS] * 8
    assert "mlx5_5/1: Active/LinkUp, 200 Gb/s" in [v.message for v in verdicts]


def test_ethernet_selection_judges_only_the_roce_ports():
    verdicts = judge(H100_NDR, link_layer="Ethernet", expected_ports=4)
    assert [(v.subject, v.status) for v in verdicts] == [
        ("mlx5_1/1", PASS),
        ("mlx5_2/1", FAIL),
        ("mlx5_7/1", FAIL),
        ("mlx5_8/1", FAIL),
    ]
    assert verdicts[1].message == "mlx5_2/1: Down/Disabled, expected Active/LinkUp"


def test_any_selection_judges_every_port():
    verdicts = judge(H100_NDR, link_layer="any", expected_ports=12)
    assert len(verdicts) == 12
    assert [v.subject for v in by_status(verdicts, FAIL)] == ["mlx5_2/1", "mlx5_7/1", "mlx5_8/1"]
    assert len(by_status(verdicts, PASS)) == 9


def test_devices_filter_judges_only_the_listed_cas():
    verdicts = judge(H100_DOWN, devices=["mlx5_0", "mlx5_3"], expected_ports=2)
    assert [(v.subject, v.status) for v in verdicts] == [("mlx5_0/1", PASS), ("mlx5_3/1", FAIL)]


def test_listed_device_missing_from_output_fails():
    verdicts = judge(H100_NDR, devices=["mlx5_0", "mlx5_12"])
    assert [(v.subject, v.status) for v in verdicts] == [("mlx5_12", FAIL), ("mlx5_0/1", PASS)]
    assert verdicts[0].message == "mlx5_12: not present, expected in devices list"
    assert verdicts[0].expected == {"device": "mlx5_12"}
    assert len(verdicts[0].observed["cas"]) == 12


def test_listed_device_without_a_port_of_the_judged_layer_fails():
    """A CA configured to Ethernet (mlxconfig LINK_TYPE) where InfiniBand is expected."""
    verdicts = judge(H100_NDR, devices=["mlx5_1"])
    assert [(v.subject, v.status) for v in verdicts] == [("mlx5_1", FAIL), ("", ERROR)]
    assert verdicts[0].message == "mlx5_1: no InfiniBand port, found 1 Ethernet"
    assert verdicts[1].message == "no InfiniBand ports on mlx5_1 in ibstat output (found 1 Ethernet)"


def test_wrong_port_count_fails_with_observed_and_expected():
    verdicts = judge(H100_NDR, expected_ports=10, min_rate_gbps=400)
    (fail,) = by_status(verdicts, FAIL)
    assert (fail.subject, fail.message) == ("", "8 InfiniBand ports, expected 10")
    assert fail.observed == {"ports": 8, "subjects": NDR_IB}
    assert fail.expected == {"ports": 10}
    assert len(by_status(verdicts, PASS)) == 8


def test_all_ethernet_host_with_default_layer_is_an_error_not_a_pass():
    verdicts = judge(H100_ROCE)
    assert len(verdicts) == 1
    assert verdicts[0].status is ERROR
    assert verdicts[0].message == "no InfiniBand ports in ibstat output (found 12 Ethernet)"


def test_all_ethernet_host_expected_to_have_no_ib_ports_passes():
    verdicts = judge(H100_ROCE, expected_ports=0)
    assert [(v.status, v.message) for v in verdicts] == [(PASS, "0 InfiniBand ports, expected 0")]


def test_all_ethernet_host_expected_to_have_ib_ports_fails_on_count():
    verdicts = judge(H100_ROCE, expected_ports=8)
    assert [(v.status, v.message) for v in verdicts] == [(FAIL, "0 InfiniBand ports, expected 8")]


def test_truncated_output_judges_complete_ports_and_errors_on_the_cut_part():
    verdicts = judge(LUSTRE_CUT, expected_ports=3, min_rate_gbps=200)
    assert [(v.subject, v.status) for v in verdicts] == [("mlx5_0", ERROR), ("mlx5_4/1", PASS), ("mlx5_2/1", FAIL)]
    assert verdicts[0].message == "mlx5_0: output ends before any port (ibstat output incomplete)"
    assert verdicts[0].excerpt.splitlines()[0] == "CA 'mlx5_0'"
    assert verdicts[2].message == "mlx5_2/1: Down/Disabled, expected Active/LinkUp"


def test_device_absent_from_truncated_output_is_an_error_not_a_fail():
    verdicts = judge(LUSTRE_CUT, devices=["mlx5_4", "mlx5_9"])
    assert [(v.subject, v.status) for v in verdicts] == [("mlx5_9", ERROR), ("mlx5_4/1", PASS)]


def test_logical_down_with_physical_linkup_fails():
    verdicts = judge(VF_DOWN_LINKUP, expected_ports=1, min_rate_gbps=200)
    assert len(verdicts) == 1
    assert (verdicts[0].status, verdicts[0].subject) == (FAIL, "mlx5_7/1")
    assert verdicts[0].message == "mlx5_7/1: Down/LinkUp, expected Active/LinkUp"


def test_vpi_card_judges_only_its_infiniband_port():
    verdicts = judge(CX3_VPI)
    assert [(v.subject, v.status, v.message) for v in verdicts] == [
        ("mlx4_0/1", FAIL, "mlx4_0/1: Down/Polling, expected Active/LinkUp")
    ]


def test_unparsable_output_raises_for_the_runner():
    with pytest.raises(ParseError) as caught:
        list(ports(captures(IBSTAT, "Fatal error:  No devices\n"), IbPorts()))
    assert caught.value.excerpt == "Fatal error:  No devices\n"


def test_registered_under_its_name_with_probe_params_and_description():
    spec = all_checks()["ib.ports"]
    assert spec.judge is ports
    assert spec.probes_for(IbPorts()) == (IBSTAT,)
    assert spec.params is IbPorts
    assert spec.description == (
        "Every judged HCA port is Active/LinkUp at or above the minimum rate, in the expected number."
    )
    assert IBSTAT.argv == ("ibstat",) and IBSTAT.timeout_s == 10
    assert all(field.description for field in IbPorts.model_fields.values())


@pytest.mark.parametrize(
    "bad",
    [
        {"min_rate_gbps": "fast"},
        {"min_rate_gbps": 0},
        {"min_rate_gbps": True},
        {"expected_ports": -1},
        {"expected_ports": 8.5},
        {"link_layer": "RoCE"},
        {"devices": []},
        {"devices": "mlx5_0"},
        {"min_rate": 400},
    ],
)
def test_bad_params_are_rejected(bad):
    with pytest.raises(ValidationError):
        IbPorts.model_validate(bad)


def test_params_defaults():
    want = IbPorts.model_validate({})
    assert (want.link_layer, want.min_rate_gbps, want.expected_ports, want.devices) == ("InfiniBand", None, None, None)


# -- issue 17: a node whose ibstat lists no device at all ----------------------------------------------

NO_DEVICE = "no InfiniBand device found (ibstat printed nothing, exit 0)"


def test_no_device_with_expected_ports_fails_naming_what_is_missing():
    # Debian 12: driver not loaded / HCAs gone, ibstat prints nothing and exits 0
    assert [(v.status, v.subject, v.message, dict(v.observed), dict(v.expected)) for v in judge_empty(**NDR)] == [
        (FAIL, "", f"{NO_DEVICE}; expected 8 InfiniBand ports", {"cas": [], "ports": 0}, {"ports": 8})
    ]


def test_no_device_with_a_devices_list_fails_naming_the_devices():
    [verdict] = judge_empty(devices=["mlx5_0", "mlx5_3"], link_layer="any")
    assert (verdict.status, verdict.message, dict(verdict.expected)) == (
        FAIL,
        f"{NO_DEVICE}; expected mlx5_0, mlx5_3",
        {"devices": ["mlx5_0", "mlx5_3"]},
    )


def test_no_device_without_an_expectation_still_fails():
    # ib.ports is enabled for this node, so it is meant to have ports: an ERROR would never drain a
    # node that lost every HCA; a node without IB by design sets expected_ports: 0 (or drops the check)
    [verdict] = judge_empty()
    assert (verdict.status, verdict.message) == (
        FAIL,
        f"{NO_DEVICE}; expected at least one InfiniBand port (set expected_ports: 0 for a node without any)",
    )


def test_no_device_where_none_is_expected_passes():
    [verdict] = judge_empty(expected_ports=0)
    assert (verdict.status, verdict.message) == (PASS, f"{NO_DEVICE}; expected 0 ports")


def test_empty_output_with_another_exit_code_is_an_error_not_no_device():
    # the runner stops a bad exit before the judge; a judge handed one anyway does not call it "none"
    out = captures(IBSTAT, "", exit_code=1)
    [verdict] = ports(out, IbPorts(**NDR))
    assert (verdict.status, verdict.message) == (
        ERROR,
        "ibstat printed nothing and exited 1: cannot tell whether there is a device",
    )


@pytest.mark.parametrize(
    "exit_code, outcome, status, message",
    [
        (0, "exited", FAIL, f"{NO_DEVICE}; expected 8 InfiniBand ports"),
        (1, "exited", ERROR, "ibstat exited 1"),
        (None, "timeout", Status.TIMEOUT, "ibstat timed out: killed after 10 s"),
        (-9, "exited", ERROR, "SIGKILL"),
    ],
    ids=["exit-0", "exit-1", "killed-timeout", "killed-signal"],
)
def test_empty_output_is_judged_by_how_ibstat_ended(exit_code, outcome, status, message):
    """Only a clean exit makes "nothing printed" mean "no device"; the runner's own wording for a
    bad exit (owned by the runner) is matched by its part that names how ibstat ended."""
    from nodecheck.config.playbook import PlannedCheck
    from nodecheck.core.model import Capture, Outcome
    from nodecheck.run.runner import judge_node

    spec = all_checks()["ib.ports"]
    params = IbPorts(**NDR)
    capture = Capture(
        "node001",
        IBSTAT.name,
        IBSTAT.argv,
        Outcome(outcome),
        exit_code,
        "",
        "",
        10.0,
        "killed after 10 s" if outcome == "timeout" else "",
    )
    [result] = judge_node(
        PlannedCheck(spec, params, spec.probes_for(params)), "node001", {("node001", IBSTAT.name): capture}
    )
    assert result.verdict.status is status
    if status is FAIL:
        assert result.verdict.message == message
    else:
        assert message in result.verdict.message and NO_DEVICE not in result.verdict.message


def test_blank_lines_or_garbage_are_still_unreadable_not_no_device():
    for text in ("\n", "\x00\x01\xff\n"):
        with pytest.raises(ParseError):
            list(ports(captures(IBSTAT, text), IbPorts(**NDR)))


def judge_empty(**params: object) -> list[Verdict]:
    return list(ports(captures(IBSTAT, ""), IbPorts(**params)))
