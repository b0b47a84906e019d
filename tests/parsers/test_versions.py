"""Version parsers: each documented form of the small outputs. (The NCCL_DEBUG log's version and net
plugin parsers were removed in issue 32: the nccl-tests checks read the "NCCL version" line through
parse_nccl_tests, which tests/parsers/test_nccl_tests.py runs on every nccl-debug-info file.)"""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.versions import (
    NcclLib,
    NcclLibs,
    OsRelease,
    parse_ldconfig_nccl,
    parse_nccl_conf,
    parse_nccl_env,
    parse_nccl_header,
    parse_ofed_info,
    parse_os_release,
    parse_uname_r,
)
from tests.growth import assert_linear

# -- uname -r -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, release",
    [
        ("5.15.0-112-generic\n", "5.15.0-112-generic"),  # Ubuntu linux-image-5.15.0-112-generic
        ("6.18.44-fc-v669\n", "6.18.44-fc-v669"),  # `uname -r` on this project's build host
        ("5.14.0-570.el9.x86_64\n", "5.14.0-570.el9.x86_64"),  # RHEL 9 / Rocky 9.6 kernel package release
    ],
)
def test_uname_r(text, release):
    assert parse_uname_r(text) == release


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("\n", "empty output"),
        ("Linux\n", "not a kernel release"),  # `uname` without -r
        ("5.15.0-112-generic\n5.15.0-113-generic\n", "not a kernel release"),
    ],
)
def test_uname_r_unreadable(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_uname_r(text)


# -- /etc/os-release ----------------------------------------------------------------------------

# `cat /etc/os-release` on this project's build host (Debian 12), verbatim
DEBIAN_12 = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""


def test_os_release_debian():
    assert parse_os_release(DEBIAN_12) == OsRelease("debian", "12", "Debian GNU/Linux 12 (bookworm)")


def test_os_release_forms():
    # os-release(5) (freedesktop.org): shell-compatible assignments, values optionally in double or
    # single quotes with backslash escapes for $ " \ `, '#' comment lines; VERSION_ID and
    # PRETTY_NAME are optional (rolling distributions have no VERSION_ID)
    text = '# written by the image build\nNAME=\'Rocky Linux\'\nVERSION="9.3 (Blue Onyx)"\nID=rocky\nVERSION_ID="9.3"\n'
    assert parse_os_release(text) == OsRelease("rocky", "9.3", "Rocky Linux 9.3 (Blue Onyx)")
    assert parse_os_release('NAME="Arch Linux"\nID=arch\nBUILD_ID=rolling\n') == OsRelease("arch", None, "Arch Linux")
    assert parse_os_release('ID=x\nPRETTY_NAME="say \\"hi\\" \\$HOME"\n').pretty_name == 'say "hi" $HOME'


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ('NAME="Debian GNU/Linux"\nVERSION_ID="12"\n', "no ID line"),
        ("ID=debian\nVERSION_ID=12\n", "no PRETTY_NAME and no NAME"),
        ('PRETTY_NAME="Debian GNU/Linux 12 (bookw', "unterminated quote"),  # cut
        ("cat: /etc/os-release: No such file or directory\n", "not a KEY=value line"),
    ],
)
def test_os_release_unreadable(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_os_release(text)


# -- ofed_info -s -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, version",
    [
        # DaoCloud/DaoCloud-docs docs/zh/docs/network/modules/spiderpool/install/ofed_driver.md
        ("MLNX_OFED_LINUX-23.07-0.5.1.2:\n", "MLNX_OFED_LINUX-23.07-0.5.1.2"),
        # NVIDIA/hpc-container-maker#520 (2025-04-09): DOCA-era host
        ("OFED-internal-25.01-0.6.0:\n", "OFED-internal-25.01-0.6.0"),
        # the same two shapes for other releases: MLNX_OFED 23.10; "OFED-internal-23.07-0.5.0:" as a
        # public BlueField-3 RoCE setup README shows it (repository not recorded); DOCA-OFED 24.10
        ("MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "MLNX_OFED_LINUX-23.10-1.1.9.0"),
        ("OFED-internal-23.07-0.5.0:\n", "OFED-internal-23.07-0.5.0"),
        ("OFED-internal-24.10-1.1.4:\n", "OFED-internal-24.10-1.1.4"),
        ("MLNX_OFED_LINUX-5.4-1.0.3.0", "MLNX_OFED_LINUX-5.4-1.0.3.0"),  # no colon, no newline
    ],
)
def test_ofed_info(text, version):
    assert parse_ofed_info(text) == version


@pytest.mark.parametrize(
    "text",
    [
        "",  # the probe prints nothing where ofed_info is absent
        "bash: ofed_info: command not found\n",  # bash's wording
        "sh: 1: ofed_info: not found\n",  # dash's wording
    ],
)
def test_ofed_info_not_installed(text):
    assert parse_ofed_info(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "MLNX_OFED_LINUX-23.10\n",  # cut
        "23.10-1.1.9.0\n",  # `ofed_info -n`, not -s
        # plain `ofed_info` (no -s): the package list follows the version line
        "MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):\n\nar_mgr:\n"
        "osm_plugins/ar_mgr/ar_mgr-1.0-0.3.MLNX20231017\n",
    ],
)
def test_ofed_info_unreadable(text):
    with pytest.raises(ParseError, match="not '<package>-<version>:'"):
        parse_ofed_info(text)


# -- ldconfig -p | libnccl ----------------------------------------------------------------------

# NVIDIA/nccl#1991 (2026-01-21, Ubuntu 24.04, libnccl2 2.29.2): "libnccl.so.2 (libc6,x86-64) =>
# /lib/x86_64-linux-gnu/libnccl.so.2". ldconfig -p indents entries with a tab; " -> target" is the
# probe's readlink -f, named after the deb's file (libnccl.so.2.29.2).
DEB = "\tlibnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2"
DEB_TARGET = "/lib/x86_64-linux-gnu/libnccl.so.2.29.2"


def test_ldconfig_plain_line():
    assert parse_ldconfig_nccl(DEB + "\n") == NcclLibs(
        (NcclLib("libnccl.so.2", "libc6,x86-64", "/lib/x86_64-linux-gnu/libnccl.so.2", None),),
        version=None,
        net_plugins=(),
        conflicting=(),
    )


def test_ldconfig_annotated_lines_with_plugins():
    text = (
        f"{DEB} -> {DEB_TARGET}\n"
        "\tlibnccl.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so -> " + DEB_TARGET + "\n"
        "\tlibnccl-net.so (libc6,x86-64) => /opt/amazon/ofi-nccl/lib/libnccl-net.so"
        " -> /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so\n"
        "\tlibnccl-net-ofi.so (libc6,x86-64) => /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
        " -> /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so\n"
    )
    facts = parse_ldconfig_nccl(text)
    assert facts.version == "2.29.2"
    assert facts.net_plugins == ("libnccl-net.so", "libnccl-net-ofi.so")
    assert facts.conflicting == ()
    assert [lib.target for lib in facts.libs][:2] == [DEB_TARGET, DEB_TARGET]


def test_ldconfig_aarch64_and_header_and_other_libs():
    # glibc elf/cache.c print_entry writes ",AArch64" for 64-bit Arm; `ldconfig -p` starts with
    # "N libs found in cache `/etc/ld.so.cache'"; entries of other libraries are skipped
    text = (
        "1234 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibnccl.so.2 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libnccl.so.2"
        " -> /usr/lib/aarch64-linux-gnu/libnccl.so.2.23.4\n"
        "\tlibcuda.so.1 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libcuda.so.1\n"
    )
    facts = parse_ldconfig_nccl(text)
    assert facts.version == "2.23.4"
    assert [lib.soname for lib in facts.libs] == ["libnccl.so.2"]


def test_ldconfig_unversioned_pip_library_names_no_version():
    # vllm-project/vllm#3661: the NCCL pip wheel ships a single file named libnccl.so.2
    path = "/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2"
    facts = parse_ldconfig_nccl(f"\tlibnccl.so.2 (libc6,x86-64) => {path} -> {path}\n")
    assert facts.version is None and facts.conflicting == ()


def test_ldconfig_two_versions_conflict():
    # vllm-project/vllm#4312: a second NCCL (/root/.config/vllm/nccl/cu12/libnccl.so.2.18.1) added
    # to the cache of a host whose system NCCL is another version; the first entry is what loads
    vllm = "/root/.config/vllm/nccl/cu12/libnccl.so.2.18.1"
    text = (
        f"\tlibnccl.so.2 (libc6,x86-64) => /root/.config/vllm/nccl/cu12/libnccl.so.2 -> {vllm}\n{DEB} -> {DEB_TARGET}\n"
    )
    facts = parse_ldconfig_nccl(text)
    assert facts.version == "2.18.1"
    assert facts.conflicting == ("2.18.1", "2.29.2")


def test_ldconfig_32bit_entry_is_not_the_version():
    text = (
        "\tlibnccl.so.2 (libc6) => /usr/lib/i386-linux-gnu/libnccl.so.2 -> /usr/lib/i386-linux-gnu/libnccl.so.2.23.4\n"
    )
    assert parse_ldconfig_nccl(text).version is None


def test_ldconfig_no_nccl():
    assert parse_ldconfig_nccl("") == NcclLibs((), None, (), ())


@pytest.mark.parametrize(
    "text",
    [
        "\tlibnccl.so.2 (libc6,x86-64) => \n",  # cut
        "ldconfig: command not found\n",
        "/lib/x86_64-linux-gnu/libnccl.so.2\n",  # `find` output, not ldconfig
    ],
)
def test_ldconfig_unreadable(text):
    with pytest.raises(ParseError, match="not an ldconfig entry"):
        parse_ldconfig_nccl(text)


# -- nccl.h -------------------------------------------------------------------------------------

# NVIDIA/nccl src/nccl.h.in: "#define NCCL_MAJOR ${nccl:Major}" ... "#define NCCL_VERSION_CODE
# ${nccl:Version}" and NCCL_VERSION(X,Y,Z) = X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after;
# rendered here for 2.23.4 (code 22304).
HEADER = """#ifndef NCCL_H_
#define NCCL_H_

#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 23
#define NCCL_PATCH 4
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22304
#define NCCL_VERSION(X,Y,Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
"""


def test_nccl_header():
    assert parse_nccl_header(HEADER) == "2.23.4"


@pytest.mark.parametrize(
    "code, version",
    [("22304", "2.23.4"), ("20903", "2.9.3"), ("2804", "2.8.4"), ("2408", "2.4.8"), ("22902", "2.29.2")],
)
def test_nccl_header_version_code_only(code, version):
    assert parse_nccl_header(f"#define NCCL_VERSION_CODE {code}\n") == version


def test_nccl_header_absent():
    assert parse_nccl_header("") is None  # runtime-only node: the probe prints no header


@pytest.mark.parametrize(
    "text, reason",
    [
        ("#define NCCL_MAJOR ${nccl:Major}\n", "not a number"),  # the unrendered template
        ("#define NCCL_MAJOR 2\n#define NCCL_MINOR 23\n", "no NCCL_MAJOR/MINOR/PATCH or NCCL_VERSION_CODE"),
        ("#include <stdio.h>\n", "no NCCL_MAJOR"),
        (HEADER.replace("22304", "22305"), "disagrees"),
        (HEADER + "#define NCCL_MINOR 24\n", "defined twice"),
    ],
)
def test_nccl_header_unreadable(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_nccl_header(text)


# -- /etc/nccl.conf and env ---------------------------------------------------------------------


# NVIDIA/nccl src/misc/param.cc setEnvFile: '#' lines are skipped, each other line is split at the
# first '=' with both sides kept verbatim. Values are those the corpus log shows set
# (nccl-debug-info/sglang-*: NCCL_SOCKET_IFNAME enp25s0np0, NCCL_IB_GID_INDEX 3, NCCL_IB_TC 106).
def test_nccl_conf():
    text = (
        "# RoCE fabric\n"
        "NCCL_SOCKET_IFNAME=enp25s0np0\n"
        "\n"
        "NCCL_IB_GID_INDEX=3\r\n"
        "NCCL_IB_TC=106\n"
        "NCCL_IB_HCA==mlx5_0,mlx5_1\n"  # a leading '=' in the value is the value's
        'NCCL_DEBUG_SUBSYS="INIT"\n'
    )  # NCCL does not unquote: the quotes are the value's
    assert parse_nccl_conf(text) == {
        "NCCL_SOCKET_IFNAME": "enp25s0np0",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
        "NCCL_IB_HCA": "=mlx5_0,mlx5_1",
        "NCCL_DEBUG_SUBSYS": '"INIT"',
    }
    assert parse_nccl_conf("") == {}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("NCCL_DEBUG = INFO\n", "not a NAME=value line"),  # NCCL would set "NCCL_DEBUG " instead
        ("NCCL_DEBUG\n", "not a NAME=value line"),
        ("NCCL_IB_TC=106\nNCCL_IB_TC=104\n", "set twice"),
    ],
)
def test_nccl_conf_unreadable(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_nccl_conf(text)


def test_nccl_env():
    # `env | grep '^NCCL_'`: NAME=value, the value may hold '='
    text = "NCCL_SOCKET_IFNAME=enp25s0np0\nNCCL_IB_GID_INDEX=3\nNCCL_IB_TC=106\nNCCL_NET=AWS Libfabric\n"
    assert parse_nccl_env(text) == {
        "NCCL_SOCKET_IFNAME": "enp25s0np0",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
        "NCCL_NET": "AWS Libfabric",
    }
    assert parse_nccl_env("NCCL_TOPO_FILE=/a=b.xml\n") == {"NCCL_TOPO_FILE": "/a=b.xml"}
    assert parse_nccl_env("") == {}


@pytest.mark.parametrize("text", ["PATH=/usr/bin\n", "NCCL_DEBUG\n", "export NCCL_DEBUG=INFO\n"])
def test_nccl_env_unreadable(text):
    with pytest.raises(ParseError, match="not an NCCL_ variable line"):
        parse_nccl_env(text)


# --- issue 17: linear time on one long line ----------------------------------------------------------


@pytest.mark.growth
@pytest.mark.parametrize(
    "parse, text",
    [  # each a function of n: at 4n = 1,000,000 the input that took seconds (growth: tests/growth.py)
        (parse_nccl_header, lambda n: "x" + " " * n),  # did not finish in 400 s
        (parse_nccl_header, lambda n: "#" + " " * n + "x"),
        (parse_nccl_header, lambda n: "# define" + " \t" * (n // 2) + "x"),
        (parse_nccl_header, lambda n: "#define NCCL_MAJOR 2\n" * (n // 10) + "x" + " " * n),
        (parse_ofed_info, lambda n: "MLNX-" * (n // 5)),
        (parse_ldconfig_nccl, lambda n: "libnccl.so.2 (" + " " * n),
        (parse_os_release, lambda n: "A=" + " " * n),
    ],
    ids=[
        *("header-spaces", "header-hash-spaces", "header-define-tabs", "header-defines-then-spaces"),
        *("ofed-mlnx", "ldconfig-spaces", "os-release-spaces"),
    ],
)
def test_one_long_line_parses_in_linear_time(parse, text):
    assert_linear(parse, text, 250_000, ignore=ParseError)


def test_a_define_must_start_its_line():
    # C preprocessor directives start a line; anchoring them is what makes the scan linear
    assert parse_nccl_header("#define NCCL_MAJOR 2\n#define NCCL_MINOR 23\n  #  define NCCL_PATCH 4\n") == "2.23.4"
    with pytest.raises(ParseError, match="no NCCL_MAJOR"):
        parse_nccl_header("/* #define NCCL_MAJOR 2 */ x #define NCCL_MINOR 23\n")
