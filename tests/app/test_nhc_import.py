"""import-nhc: NHC configurations translated into playbooks that load, every other line listed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from nodecheck.app.nhc_import import import_nhc, read_conf
from nodecheck.app.nhc_model import EXIT_NOTHING, EXIT_PARTIAL, EXIT_TRANSLATED, block_of
from nodecheck.app.nhc_render import render
from nodecheck.app.nhc_translate import translate
from nodecheck.config.playbook import load_playbook
from nodecheck.core.errors import ConfigError
from nodecheck.parsers.nhc_conf import MAX_CONF_BYTES, NhcConfError, parse_nhc_conf
from tests.helpers import DATA, data, data_files

# per real file: the NHC lines each check was built from, the lines not translated, the lines
# that need nothing (a limit that never fails, an NHC-only setting)
EXPECTED = {
    "nhc-conf/aznhc-hb120rs-v3.conf": (
        {"cpu": [22], "mem": [23, 24], "ib.ports": [25], "command.nhc_eth": [26, 27, 28, 29]},
        [36, 43, 44],
        [],
    ),
    "nhc-conf/aznhc-nd96asr-v4.conf": (
        {
            "cpu": [22],
            "mem": [23, 24],
            "ib.ports": list(range(25, 33)),
            "command.nhc_eth": list(range(33, 44)),
            "gpu.count": [51],
            "gpu.xid": [52],
            "gpu.health": [53, 56, 58],
        },
        [44, 54, 55, 57, 65, 66, 67],
        [],
    ),
    "nhc-conf/aznhc-nd96isr-h100-v5.conf": (
        {
            "cpu": [16],
            "mem": [17, 18],
            "ib.ports": list(range(19, 27)),
            "command.nhc_eth": list(range(27, 38)),
            "gpu.count": [46],
            "gpu.health": [47, 51, 53],
            "gpu.xid": [48],
        },
        [38, 39, 49, 50, 52, 60, 61],
        [],
    ),
    "nhc-conf/lambdal-nhc-genconf-8480-nhc.conf": (
        {
            "fs.mounts": list(range(154, 189)),
            "fs.free": [189, 190, 191, 192, 193, 194, 201, 202, 203, 204],
            "cpu": [219],
            "mem": [220, 221],
            "ib.ports": [222],
            "command.nhc_eth": list(range(223, 232)),
            "gpu.health": [232, 233, 257, 259, 263],
            "proc.health": [240],
            "services": [241, 243],
            "gpu.xid": [264],
        },
        [17, 18, 19, 20, 242, 250, 258, 260, 261, 262, 265, 266],
        [205, 206, 207, 210, 211, 212],
    ),
    "nhc-conf/mej-nhc-sample-nhc.conf": (
        {"fs.mounts": [81], "services": [125]},
        [55, 104, 107, 110],
        [],
    ),
    "nhc-conf/vub-hpc-site-nhc.conf": (
        {"mem": [52], "fs.mounts": [89, 95], "fs.free": [101], "services": [136, 139, 160]},
        [40, 43, 46, 55, 67, 68, 80, 81, 92, 93, 94, 104, 115, 118, 121, 125, 128, 168, 201, 209, 212, 218, 219, 235],
        [13, 16],
    ),
}


def test_every_recorded_configuration_has_its_expectation():
    assert sorted(EXPECTED) == data_files("nhc-conf")


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_real_configurations_translate_exactly_and_the_playbook_loads(path, tmp_path):
    result, text = import_nhc(str(DATA / path))
    checks, untranslated, ignored = EXPECTED[path]
    assert {name: [r.line for r in lines] for name, lines in result.origins.items()} == checks
    assert [u.line for u in result.untranslated] == untranslated
    assert [r.line for r in result.ignored] == ignored
    assert result.exit_code == EXIT_PARTIAL
    # the key acceptance: `nodecheck run --playbook` loads what was written
    out = tmp_path / "site.yml"
    out.write_text(text)
    book = load_playbook(str(out))
    assert [c.spec.name for c in book.checks] == list(checks)
    # every line of the file is either translated, refused or noted, never two of them
    lines = [r.line for v in result.origins.values() for r in v] + untranslated + ignored
    assert len(lines) == len(set(lines))
    for line in untranslated:  # each refused line is in the playbook's closing comments with its reason
        assert re.search(rf"^# {re.escape(Path(path).name)}:{line}  ", text, re.M)


def test_azure_h100_values():
    result, _ = import_nhc(str(DATA / "nhc-conf/aznhc-nd96isr-h100-v5.conf"))
    assert block_of(result, "cpu") == {"sockets": 2, "cores_per_socket": 48, "cpus": 96, "threads_per_core": 1}
    mem = block_of(result, "mem")
    assert mem["total_gib"] == 1870.187  # 1915071MB: NHC's MB are 1024 kB
    assert mem["total_tolerance_pct"] == 5.0
    assert mem["swap"] == "off"  # check_hw_swap 0kB 0kB
    assert block_of(result, "ib.ports") == {
        "min_rate_gbps": 400.0,
        "link_layer": "any",
        "devices": [f"mlx5_ib{i}" for i in range(8)],
    }
    assert block_of(result, "gpu.count") == {"expect": 8}
    eth = block_of(result, "command.nhc_eth")
    assert eth["argv"] == ["cat", "/proc/net/dev"]
    devices = ["lo", "eth0"] + [f"ib{i}" for i in range(8)] + ["docker0"]
    assert re.search(eth["match"], "".join(f"  {d}: 0 0\n" for d in devices), re.M)
    assert not re.search(eth["match"], "".join(f"  {d}: 0 0\n" for d in devices if d != "ib5"), re.M)
    refused = {u.line: u.reason for u in result.untranslated}
    assert "$AZ_NHC_ROOT" not in refused[52]  # aznhc's own check: named as such, before any expansion
    assert "nccl.allreduce_single" in refused[52]


def test_lambda_values_mounts_free_load_services():
    result, _ = import_nhc(str(DATA / "nhc-conf/lambdal-nhc-genconf-8480-nhc.conf"))
    mounts = block_of(result, "fs.mounts")
    assert mounts["from_fstab"] is False
    by_path = {m["path"]: m for m in mounts["mounts"]}
    assert by_path["/"] == {"path": "/", "options": ["rw"], "fstype": "ext4", "source": "/dev/md0p2"}
    assert by_path["/snap/lxd/28373"]["options"] == ["ro"]
    free = block_of(result, "fs.free")
    assert (free["shm"], free["tmp"]) == (None, None)
    assert free["paths"]["/dev"] == {"free_pct": {"fail_below": 10.0}, "inodes_free_pct": {"fail_below": 2.0}}
    assert "/snap/core20/2182" not in free["paths"]  # commented out in the file
    assert block_of(result, "proc.health")["load_fail_per_cpu"] == 2.0  # 448 over 224 CPUs
    assert block_of(result, "services")["required"] == ["rpcbind", "nfslock"]
    assert block_of(result, "ib.ports")["devices"] == ["mlx5_bond_0"]
    assert block_of(result, "mem")["swap"] == "on"
    refused = {u.line: u.reason for u in result.untranslated}
    assert "no `||`" in refused[17]
    assert "-m/-f" in refused[242]
    notes = {r.line: r.note for r in result.ignored}
    assert "100% never fails" in notes[205]


def test_vub_values_come_from_sysconfig_so_they_are_refused_with_the_fix():
    result, _ = import_nhc(str(DATA / "nhc-conf/vub-hpc-site-nhc.conf"))
    refused = {u.line: u.reason for u in result.untranslated}
    assert refused[40].startswith("$NHC_SOCKETS is set outside this file")
    assert refused[168].startswith("$((${NHC_LOADAVG_MULTIPLIER:-2}*$NHC_CORES)) is computed on the node")
    assert "shell code" in refused[80]
    assert "fs.free judges free inodes in %" in refused[104]
    assert block_of(result, "fs.free")["paths"] == {"/": {"free_pct": {"fail_below": 10.0}}}
    assert block_of(result, "services")["required"] == ["sshd", "crond", "rsyslog"]


# ---------------------------------------------------------------- one directive at a time


def _translate(text: str):
    return translate(parse_nhc_conf(text), "nhc.conf")


def _only(text: str, check: str):
    result = _translate(text)
    assert result.untranslated == [], result.untranslated
    return block_of(result, check)


def _refused(text: str) -> str:
    result = _translate(text)
    [miss] = result.untranslated
    assert not result.checks
    return miss.reason


def test_fs_mount_forms():
    assert _only("* || check_fs_mount_rw /scratch nfs01:/scratch nfs\n", "fs.mounts")["mounts"] == [
        {"path": "/scratch", "options": ["rw"], "fstype": "nfs", "source": "nfs01:/scratch"}
    ]
    nfs3 = _only("* || check_fs_mount -s bluearc0:/home -t nfs -o '/(^|,)vers=3(,|$)/' -f /home\n", "fs.mounts")
    assert nfs3["mounts"] == [{"path": "/home", "options": ["vers=3"], "fstype": "nfs", "source": "bluearc0:/home"}]
    hard = _only("* || check_fs_mount -r -s bluearc1:/global/home -t nfs -o *hard* -f /home\n", "fs.mounts")
    assert hard["mounts"][0]["options"] == ["hard"]
    pts = _only("* || check_fs_mount_rw -t devpts -s '/(none|devpts)/' -f /dev/pts\n", "fs.mounts")
    assert pts["mounts"][0]["source"] == "/(none|devpts)/"  # fs.mounts reads NHC's /regex/ itself
    two = _only("* || check_fs_mount_rw -F /projects -f /home\n", "fs.mounts")
    assert [m["path"] for m in two["mounts"]] == ["/projects", "/home"]  # in the order written
    not_ro = _only("* || check_fs_mount -o '!/(^|,)ro(,|$)/' -f /data\n", "fs.mounts")
    assert not_ro["mounts"] == [{"path": "/data", "options": [], "forbidden_options": ["ro"]}]
    merged = _only("* || check_fs_mount -t nfs -f /home\n* || check_fs_mount_rw -f /home\n", "fs.mounts")
    assert merged["mounts"] == [{"path": "/home", "options": ["rw"], "fstype": "nfs"}]


def test_fs_mount_refusals():
    assert "-0 makes the check non-fatal" in _refused("* || check_fs_mount_rw -0 -f /x\n")
    assert "not a regex" in _refused("* || check_fs_mount_rw -t '/nfs4?/' -f /x\n")
    assert "negated source" in _refused("* || check_fs_mount_rw -s '!srv:/x' -f /x\n")
    assert "no mountpoint" in _refused("* || check_fs_mount_rw -t nfs\n")
    assert "-q is not an option" in _refused("* || check_fs_mount_rw -q -f /x\n")
    assert "-f needs a value" in _refused("* || check_fs_mount_rw -f\n")
    assert "fs.mounts refuses it" in _refused("* || check_fs_mount_rw -f /a/../b\n")  # the check's own validation


def test_fs_space_forms():
    free = _only(
        "* || check_fs_free /tmp 128MB\n* || check_fs_free / 3%\n* || check_fs_used /var 98%\n"
        "* || check_fs_iused /tmp 90%\n* || check_fs_ifree /local 5%\n* || check_fs_size /dev/shm 512m 4g\n",
        "fs.free",
    )
    assert free["paths"] == {
        "/tmp": {"free_gib": {"fail_below": 0.125}, "inodes_free_pct": {"fail_below": 10.0}},
        "/": {"free_pct": {"fail_below": 3.0}},
        "/var": {"free_pct": {"fail_below": 2.0}},
        "/local": {"inodes_free_pct": {"fail_below": 5.0}},
        "/dev/shm": {"size_gib": {"fail_below": 0.5}},
    }
    assert "absolute ceiling" in _refused("* || check_fs_used / 10G\n")
    # a site's published line (CU Boulder RC docs): NHC never matched it, so it checked nothing
    assert "is a device" in _refused("* || check_fs_free /dev/mapper/vg_root-lv_root 5%\n")
    assert "total inode count" in _refused("* || check_fs_inodes /tmp 1k\n")
    assert _translate("* || check_fs_used / 100%\n").ignored[0].note.endswith("nothing to translate")


def test_hardware_forms():
    assert _only("* || check_hw_cpuinfo 2 12 24\n", "cpu") == {
        "sockets": 2,
        "cores_per_socket": 6,
        "cpus": 24,
        "threads_per_core": 2,
    }
    assert _only("* || check_hw_cpuinfo 2\n", "cpu") == {"sockets": 2}
    assert "not a whole number per core" in _refused("* || check_hw_cpuinfo 1 68 270\n")
    mem = _only(
        "* || check_hw_physmem 32gb 32gb 5%\n* || check_hw_physmem_free 1MB\n* || check_hw_swap 8g 8g 3%\n", "mem"
    )
    assert mem == {
        "available_pct": None,
        "ecc": "off",
        "total_gib": 32.0,
        "total_tolerance_pct": 5.0,
        "available_gib": {"fail_below": 0.001},
        "swap": "on",
    }
    ranged = _only("* || check_hw_physmem 96gb 128gb 5%\n", "mem")
    assert ranged["total_floor_gib"] == {"fail_below": 91.2}
    assert _only("* || check_hw_physmem 1048576 1048576 51200\n", "mem")["total_tolerance_pct"] == 4.883
    assert "size ceiling" in _refused("* || check_hw_swap 0 2TB\n")
    assert "RAM + swap together" in _refused("* || check_hw_mem 40g 40g 5%\n")
    assert "not free swap" in _refused("* || check_hw_swap_free 1MB\n")
    assert _only("* || check_hw_mcelog\n", "mem")["ce_per_day"] == {"fail_above": 9.0}
    ib = _only("* || check_hw_ib 40\n", "ib.ports")
    assert ib == {"min_rate_gbps": 40.0, "link_layer": "any"}
    assert "no rate" in _refused("* || check_hw_ib\n")


def test_two_lines_that_disagree_leave_the_second_untranslated():
    result = _translate("* || check_hw_physmem 32gb 32gb 5%\n* || check_hw_physmem 64gb 64gb 5%\n")
    assert [r.line for r in result.origins["mem"]] == [1]
    [miss] = result.untranslated
    assert miss.line == 2
    assert miss.reason == "mem.total_gib is 32.0 from line 1 but 64.0 here"
    rates = _translate("* || check_hw_ib 200 mlx5_0:1\n* || check_hw_ib 400 mlx5_1:1\n")
    assert [u.line for u in rates.untranslated] == [2]


def test_process_forms():
    services = _only(
        "* || check_ps_service -u root -S sshd\n* || check_ps_service -d rpc.statd -r nfslock\n"
        "* || check_ps_service -k mysqld\n* || check_ps_daemon munged root\n",
        "services",
    )
    assert services == {
        "required": ["sshd", "nfslock", "munged"],
        "with_nvswitch": [],
        "optional": [],
        "forbidden": ["mysqld"],
    }
    assert "-0 makes the check non-fatal" in _refused("* || check_ps_service -0 sshd\n")
    assert "-m/-f" in _refused("* || check_ps_service -f -m '*sshd:*' sshd\n")
    assert "no service name" in _refused("* || check_ps_service -u root\n")
    assert _only("* || check_ps_unauth_users log syslog kill\n", "proc.health")["leftovers"] == "warn"
    assert _only("* || check_ps_userproc_lineage\n", "proc.health")["leftovers"] == "fail"
    assert _translate("* || check_ps_unauth_users ignore\n").ignored[0].line == 1
    assert "ignore lists" in _refused("* || check_ps_unauth_users -u 42 die\n")
    assert "owners" in _refused("* || check_ps_blacklist sshd '!root'\n")
    load = _only("* || check_hw_cpuinfo 2 12 24\n* || check_ps_loadavg 48 36\n", "proc.health")
    assert load["load_fail_per_cpu"] == 1.5  # the 5-minute limit over 24 CPUs
    assert "put check_hw_cpuinfo first" in _refused("* || check_ps_loadavg 24\n")


def test_command_checks_keep_nhc_semantics():
    selinux = _only("* || check_cmd_status -t 1 -r 1 selinuxenabled\n", "command.nhc_1_selinuxenabled")
    assert selinux == {
        "argv": ["selinuxenabled"],
        "description": "NHC check_cmd_status (* || check_cmd_status -t 1 -r 1 selinuxenabled)",
        "timeout_s": 1.0,
        "exit": [1],
    }
    ntp = _only("* || check_cmd_output -t 2 -m 'NTP synchronized: yes' -e 'timedatectl'\n", "command.nhc_1_timedatectl")
    assert ntp["argv"] == ["timedatectl"] and ntp["timeout_s"] == 2.0
    assert ntp["match"] == r"^NTP\ synchronized:\ yes$"  # a glob matches a whole line
    assert "exit" not in ntp  # NHC's default: 0, the command check's too
    eth3 = _only(
        "* || check_cmd_output -m '/addr:10\\.0\\.0\\.1/' -m '!/DOWN/' -m '/^[[:space:]]*UP /' /sbin/ifconfig eth3\n",
        "command.nhc_1_ifconfig",
    )
    assert eth3["argv"] == ["/sbin/ifconfig", "eth3"]
    assert eth3["timeout_s"] == 5.0  # NHC's default
    assert eth3["no_match"] == "(?:DOWN)"
    ifconfig = "eth3: flags\n    inet addr:10.0.0.1\n  UP BROADCAST\n"
    assert re.search(eth3["match"], ifconfig, re.M)
    assert not re.search(eth3["match"], ifconfig.replace("  UP", "  DOWN"), re.M)
    assert "passes it as an argument" in _refused("* || check_cmd_output -e 'dmesg | grep err'\n")
    assert "no command" in _refused("* || check_cmd_status -r 0\n")


def test_host_patterns_and_shell_lines_are_listed_with_the_reason():
    result = _translate(
        "n* || check_hw_cpuinfo 2 8 8\n/^gpu/ || check_hw_ib 200\n{n[1-4]} || check_fs_mount_rw -f /\n"
        "!io* || check_fs_mount_rw -f /\n* || check_a && check_b\n* || check_site_own\n"
    )
    reasons = {u.line: u.reason for u in result.untranslated}
    assert list(reasons) == [1, 2, 3, 4, 5, 6]
    assert reasons[1].startswith("runs only on hosts matching 'n*'")
    assert "select: {labels" in reasons[2]
    assert reasons[5] == "shell code, not one NHC check call (the shell operator `&&`): translate it by hand"
    assert reasons[6] == "check_site_own: not an NHC check nodecheck knows (a site's own check?)"
    assert result.exit_code == EXIT_NOTHING


def test_settings():
    result = _translate(
        "* || export TIMEOUT=15\n* || export NHC_RM=slurm\n* || MARK_OFFLINE=0\n* || DF_FLAGS=-Tkl\n"
        "* || SCRATCH=/local/scratch\n* || check_fs_free $SCRATCH 5%\nn1 || ROOT=/x\n* || check_fs_free ${ROOT} 1%\n"
    )
    assert result.deadline_s == 15.0
    reasons = {u.line: u.reason for u in result.untranslated}
    assert "--observe" in reasons[3]
    assert reasons[4] == (
        "DF_FLAGS: an NHC setting with no nodecheck counterpart (it changes how NHC's checks run), "
        "and no translated line uses it"
    )
    assert reasons[7].startswith("ROOT: an NHC setting with no nodecheck counterpart")  # for host n1 only
    assert reasons[8].startswith("${ROOT} is set outside this file")
    assert block_of(result, "fs.free")["paths"] == {"/local/scratch": {"free_pct": {"fail_below": 5.0}}}
    assert sorted(reasons) == [3, 4, 7, 8]
    assert [(r.line, r.note) for r in result.ignored] == [
        (
            2,
            "NHC_RM: the resource manager NHC drains through; nodecheck's gate is Slurm's (docs/slurm-gate.md); "
            "nothing to translate",
        ),
        (5, "SCRATCH: its value is used by line 6"),
    ]


@pytest.mark.parametrize("value", ["0", "86401", "1e3", "$T"])
def test_a_timeout_no_deadline_can_hold_is_refused(value):
    result = _translate(f"* || TIMEOUT={value}\n* || check_fs_mount_rw -f /\n")
    assert result.deadline_s is None
    assert [u.line for u in result.untranslated] == [1]


def test_mcelog_rates_set_in_the_file_are_used():
    result = _translate("* || export MCELOG_MAX_CORRECTED_RATE=20\n* || check_hw_mcelog\n")
    assert block_of(result, "mem")["ce_per_day"] == {"fail_above": 20.0}
    assert result.untranslated == [] and result.ignored[0].line == 1


def test_a_fully_translated_file_exits_0_with_the_deadline(tmp_path):
    conf = tmp_path / "nhc.conf"
    conf.write_text("# site\n* || export TIMEOUT=20\n* || check_fs_mount_rw -f /\n* || check_hw_cpuinfo 2 8 16\n")
    result, text = import_nhc(str(conf))
    assert result.exit_code == EXIT_TRANSLATED
    assert "deadline_s: 20\n" in text
    out = tmp_path / "site.yml"
    out.write_text(text)
    assert load_playbook(str(out)).deadline_s == 20.0


def test_odd_characters_in_comments_cannot_break_the_yaml(tmp_path):
    conf = tmp_path / "nhc.conf"
    conf.write_bytes(
        "* || check_fs_mount_rw -f /  # ok\u2028checks: {x: 1}\n"
        "* || check_x '\x85\n'\n"
        "* || check_fs_free / 5%\n".encode()
    )
    result, text = import_nhc(str(conf))
    out = tmp_path / "site.yml"
    out.write_text(text)
    assert [c.spec.name for c in load_playbook(str(out)).checks] == ["fs.mounts", "fs.free"]
    assert "\u2028" not in text and "\x85" not in text


# ---------------------------------------------------------------- reading the operator's file


def test_read_conf_refuses_what_is_not_a_text_file(tmp_path):
    with pytest.raises(ConfigError, match="not a regular file"):
        read_conf(str(tmp_path))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_conf(str(fifo))  # never blocks waiting for a writer
    binary = tmp_path / "core"
    binary.write_bytes(b"* || check_a\n\x7fELF\x00\x01")
    with pytest.raises(ConfigError) as caught:
        read_conf(str(binary))
    assert (caught.value.line, caught.value.message) == (2, "a NUL byte: a binary file, not an NHC configuration")
    latin = tmp_path / "latin1.conf"
    latin.write_bytes(b"# ok\n# caf\xe9\n")
    with pytest.raises(ConfigError) as caught:
        read_conf(str(latin))
    assert caught.value.line == 2 and "not UTF-8 text (byte 0xe9)" in str(caught.value)
    big = tmp_path / "big.conf"
    big.write_bytes(b"#" * (MAX_CONF_BYTES + 1))
    with pytest.raises(ConfigError, match="larger than 1024 KiB"):
        read_conf(str(big))
    with pytest.raises(ConfigError, match="cannot read"):
        read_conf(str(tmp_path / "missing.conf"))


def test_control_characters_name_the_line(tmp_path):
    conf = tmp_path / "nhc.conf"
    conf.write_text("* || check_a\n* || check_b \x1b[31m\n")
    with pytest.raises(ConfigError) as caught:
        import_nhc(str(conf))
    assert caught.value.line == 2 and caught.value.file == str(conf)


def test_an_empty_file_translates_nothing(tmp_path):
    conf = tmp_path / "empty.conf"
    conf.write_text("")
    result, text = import_nhc(str(conf))
    assert (result.exit_code, text) == (EXIT_NOTHING, "")


# ---------------------------------------------------------------- never a crash


_PIECES = [
    "* || ",
    "n0* || ",
    "||",
    "check_fs_mount_rw ",
    "check_hw_ib ",
    "check_cmd_output ",
    "check_ps_service ",
    "export ",
    "TIMEOUT=",
    "-f ",
    "-m ",
    "-t ",
    "/ ",
    "'",
    '"',
    "\\",
    "$",
    "${",
    "$((",
    "`",
    "(",
    ";",
    "#",
    "%",
    "1k ",
    "\n",
    "\r\n",
    "\t",
    "\u2028",
    "é",
]


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40), st.sampled_from(data_files("nhc-conf")), st.integers(0, 400))
def test_any_mix_of_nhc_syntax_is_parsed_or_refused_and_translated(pieces, path, cut):
    seed = data(path)
    text = seed[: cut * 20] + "".join(pieces) + seed[cut * 20 :]
    try:
        conf = parse_nhc_conf(text)
    except NhcConfError:
        return
    result = translate(conf, "nhc.conf")
    if result.checks:
        loaded = yaml.safe_load(render(result))
        assert set(loaded["checks"]) == set(result.checks)
