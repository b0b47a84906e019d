"""timedatectl: the synchronised flag under every label systemd has printed it with."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.timedatectl import ClockStatus, parse_timedatectl
from tests.helpers import data, data_files

EXPECTED = {
    "balena-intel-292-not-synchronized-ntp-na.txt": ClockStatus(False, "n/a"),
    "cb1-188-not-synchronized-ntp-inactive.txt": ClockStatus(False, "inactive"),
    "cb2-135-not-synchronized-ntp-active.txt": ClockStatus(False, "active"),
    "deis-2563-old-ntp-synchronized-yes.txt": ClockStatus(True, "yes"),
    "dietpi-1661-systemd-236-timesyncd-active-synchronized.txt": ClockStatus(True, "yes"),
    "tdcourse-49-korean-old-synchronized-local-rtc-warning.txt": ClockStatus(True, "yes"),
    "xen-api-6743-synchronized-ntp-active.txt": ClockStatus(True, "active"),
}


@pytest.mark.parametrize("path", data_files("timedatectl"))
def test_every_recording_reads_to_its_flag(path):
    assert parse_timedatectl(data(path)) == EXPECTED[path.split("/", 1)[1]]


def test_timedatectl_show_properties_read_too():
    assert parse_timedatectl("Timezone=UTC\nLocalRTC=no\nCanNTP=yes\nNTP=yes\nNTPSynchronized=no\n") == ClockStatus(
        False, "yes"
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
        "Failed to connect to bus: Host is down\n",
        data("timedatectl/cb1-188-not-synchronized-ntp-inactive.txt").split("System clock")[0],
        "System clock synchronized: maybe\n",
    ],
)
def test_garbage_and_truncated_output_raise(text):
    with pytest.raises(ParseError):
        parse_timedatectl(text)


def test_a_label_printed_twice_with_two_values_is_refused():
    # two outputs run together: whichever came first must not decide
    text = data("timedatectl/cb1-188-not-synchronized-ntp-inactive.txt")
    for extra in ("System clock synchronized: yes\n", "NTPSynchronized=yes\n"):
        with pytest.raises(ParseError, match="twice"):
            parse_timedatectl(text + extra)
    assert parse_timedatectl(text + text) == ClockStatus(False, "inactive")  # the same words twice: one fact
