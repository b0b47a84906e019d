"""container.digest: the image's digest per node through the fleet judge, on the container probe's
output (docker image inspect JSON from tests/data/scenarios, sha256sum of a .sqsh, enroot list), the
image parameter's validation, and the probe run for real by the local transport with fake runtimes:
the image travels as its own argument, never inside the script text."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from nodecheck.checks import all_checks
from nodecheck.checks.container import CONTAINER_SCRIPT, ContainerDigest, container_probes
from nodecheck.core.model import Node, Outcome, Status
from nodecheck.transport.local import LocalSession
from tests.helpers import captures, data

PASS, FAIL, ERROR = Status.PASS, Status.FAIL, Status.ERROR
IMAGE = "b10s/test:app4"
INSPECT = data("scenarios/docker-image-inspect-b10s-test-app4.txt")
STALE = data("scenarios/derived-docker-image-inspect-b10s-test-app4-stale.txt")
# docker prints "[]" on stdout and the error on stderr; the probe's 2>&1 puts them together
MISSING = data("scenarios/docker-image-inspect-missing-stdout.txt") + data(
    "scenarios/derived-docker-image-inspect-missing-stderr.txt"
)
DIGEST = "sha256:ef50faba170ccd35bd5f2b026a888aa7c43ee06373b9837d7f6290d2719851a1"
STALE_DIGEST = "sha256:0c9d4b3a8e2f11d6a7b5c4e3f2a1908d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29"
# the image IDs (config digests) of the same two recordings: what nodes are compared by
IMAGE_ID = "sha256:2082abcb0e0a78964ad616b21c3b2af7c905dc33ce9d1316f0c7bddef787148e"
STALE_ID = "sha256:5f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4"
SQSH = "/shared/images/pytorch-24.10.sqsh"
SQSH_SUM = "3f4d6c1e0b8a9f2d7e5c4b3a29180f7e6d5c4b3a291807f6e5d4c3b2a1908f7e"  # constructed
NODES = tuple(f"node{i}" for i in range(1, 7))


def section(name: str, body: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


def docker(inspect: str, rc: int = 0, runtime: str = "docker") -> str:
    return f"@@nodecheck runtime {runtime}\n" + section("inspect", inspect, rc)


def sha256(body: str, rc: int = 0) -> str:
    return "@@nodecheck runtime file\n" + section("sha256", body, rc)


def enroot(body: str, rc: int = 0) -> str:
    return "@@nodecheck runtime enroot\n" + section("enroot-list", body, rc)


def fleet(want: ContainerDigest, outputs) -> list[tuple[tuple[str, ...], Status, str]]:
    spec = all_checks()["container.digest"]
    (probe,) = spec.probes_for(want)
    by_node = {node: captures(probe, text, node=node) for node, text in zip(NODES, outputs)}
    return [(nodes, v.status, v.message) for nodes, v in spec.judge(by_node, want)]


# -- docker / podman: the registry digest of the image --------------------------------------------------


def test_docker_digest_agreement_stale_node_and_missing_image():
    want = ContainerDigest(image=IMAGE)
    assert fleet(want, [docker(INSPECT), docker(INSPECT), docker(STALE), docker(MISSING, 1)]) == [
        (("node4",), FAIL, "b10s/test:app4 not present in docker (the job would pull it or fail)"),
        (("node1", "node2"), PASS, f"image {IMAGE_ID} (majority: 2 of 3 nodes)"),
        (("node3",), FAIL, f"image {STALE_ID} on node3, expected {IMAGE_ID} (2 nodes)"),
    ]


def test_docker_digest_pinned():
    want = ContainerDigest(image=IMAGE, expect=DIGEST)
    assert fleet(want, [docker(INSPECT), docker(STALE, runtime="podman")]) == [
        (("node2",), FAIL, f"image {STALE_ID} on node2, expected {DIGEST} (pinned; 1 node)"),
        (("node1",), PASS, f"image {DIGEST} (pinned; 1 node)"),
    ]


def test_no_runtime_and_missing_runtime_fail_their_node():
    want = ContainerDigest(image=IMAGE)
    assert fleet(
        want,
        ["@@nodecheck runtime none\n", "@@nodecheck runtime podman\n@@nodecheck missing podman\n", docker(INSPECT)],
    ) == [
        (("node1",), FAIL, "b10s/test:app4: no container runtime (docker, podman) on the node"),
        (("node2",), FAIL, "b10s/test:app4: podman not installed on the node"),
        (("node3",), PASS, f"image {IMAGE_ID} (the only node judged; nothing to compare with)"),
    ]


def test_a_locally_built_image_compares_by_its_id():
    local = INSPECT.replace('"b10s/test@sha256:ef50faba170ccd35bd5f2b026a888aa7c43ee06373b9837d7f6290d2719851a1"', "")
    assert fleet(ContainerDigest(image=IMAGE), [docker(local)]) == [
        (
            ("node1",),
            PASS,
            "image sha256:2082abcb0e0a78964ad616b21c3b2af7c905dc33ce9d1316f0c7bddef787148e "
            "(the only node judged; nothing to compare with)",
        )
    ]


def test_runtime_errors_are_errors_not_absence():
    want = ContainerDigest(image=IMAGE)
    daemon_down = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"
    assert fleet(
        want, [docker("Error response from daemon: " + daemon_down, 1), docker("[]\n", 1), "@@nodecheck runtime lxc\n"]
    ) == [
        (
            ("node1",),
            ERROR,
            "cannot read image inspect output: unexpected error line 'Error response from daemon: "
            "Cannot connect to the Docker dae'… (125 characters)",
        ),
        (
            ("node2",),
            ERROR,
            "cannot read image inspect output: empty array and no 'No such image' line (was stderr captured?)",
        ),
        (("node3",), ERROR, "cannot read container probe output: unknown runtime 'lxc'"),
    ]


# -- a .sqsh / .sif file: its sha256 --------------------------------------------------------------------------


def test_sqsh_file_by_sha256sum():
    want = ContainerDigest(image=SQSH)
    assert want.mode == "file"
    other = "0" * 64
    assert fleet(
        want,
        [
            sha256(f"{SQSH_SUM}  {SQSH}\n"),
            sha256(f"{SQSH_SUM}  {SQSH}\n"),
            sha256(f"{other}  {SQSH}\n"),
            sha256(f"sha256sum: {SQSH}: No such file or directory\n", 1),
            sha256(f"sha256sum: {SQSH}: Permission denied\n", 1),
        ],
    ) == [
        (("node4",), FAIL, f"{SQSH} not present on the node"),
        (("node5",), ERROR, f"cannot read sha256sum output: {SQSH}: Permission denied"),
        # 2 of 3 readable nodes agree, but node5 could hold either value: no majority of the run
        (
            ("node1", "node2", "node3"),
            ERROR,
            f"image: no majority among sha256:{SQSH_SUM} on "
            f"node[1-2], sha256:{other} on node3 (1 node could not be read); "
            "pin the right one with expect: in the playbook",
        ),
    ]
    pinned = ContainerDigest(image=SQSH, expect=f"sha256:{SQSH_SUM}")
    assert fleet(
        pinned,
        [
            sha256(f"{SQSH_SUM}  {SQSH}\n"),
            sha256(f"{SQSH_SUM}  {SQSH}\n"),
            sha256(f"{other}  {SQSH}\n"),
            sha256(f"sha256sum: {SQSH}: Permission denied\n", 1),
        ],
    )[-2:] == [
        (("node3",), FAIL, f"image sha256:{other} on node3, expected sha256:{SQSH_SUM} (pinned; 2 nodes)"),
        (("node1", "node2"), PASS, f"image sha256:{SQSH_SUM} (pinned; 2 nodes)"),
    ]


def test_sif_for_apptainer_and_sqsh_for_enroot_are_files():
    assert ContainerDigest(image="/images/app.sif", runtime="apptainer").mode == "file"
    assert ContainerDigest(image=SQSH, runtime="enroot").mode == "file"


# -- an enroot container name: presence only -----------------------------------------------------------------


def test_enroot_container_presence():
    want = ContainerDigest(image="pytorch", runtime="enroot")
    assert want.mode == "enroot"
    assert fleet(
        want,
        [
            enroot("pytorch\nubuntu\n"),
            enroot("ubuntu\n"),
            "@@nodecheck runtime enroot\n@@nodecheck missing enroot\n",
            enroot("enroot: error: permission denied\n", 1),
        ],
    ) == [
        (("node2",), FAIL, "enroot container pytorch not present on the node"),
        (("node3",), FAIL, "pytorch: enroot not installed on the node"),
        (("node4",), ERROR, "cannot read enroot list output: exit 1"),
        (
            ("node1",),
            ERROR,
            "image: no majority among present (enroot container; pin a .sqsh file to "
            "compare content) on node1 (1 node could not be read); pin the right one with "
            "expect: in the playbook",
        ),
    ]


# -- the image parameter ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, why",
    [
        ({"image": "--privileged"}, "not an image reference or path"),
        ({"image": "-v/:/host"}, "not an image reference or path"),
        ({"image": " "}, "not an image reference or path"),
        ({"image": "b10s/test:app4\nrm -rf /"}, "not an image reference or path"),
        ({"image": "/shared/images/app.sqsh", "runtime": "docker"}, "docker takes an image reference, not a file path"),
        ({"image": "/shared/images/app.sqsh", "runtime": "podman"}, "podman takes an image reference, not a file path"),
        ({"image": "app.sif", "runtime": "apptainer"}, "apptainer images are files: give the .sif path"),
        ({"image": IMAGE, "runtime": "singularity"}, "Input should be"),
        ({}, "Field required"),
        ({"image": IMAGE, "expect": "sha256:x", "drift": "off", "tag": "x"}, "Extra inputs are not permitted"),
    ],
)
def test_image_params_are_validated(params, why):
    with pytest.raises(ValidationError, match=why):
        ContainerDigest.model_validate(params)


def test_the_image_is_an_argument_of_the_probe_never_script_text():
    image = "registry.local/train:24.10;touch${IFS}/tmp/x"  # valid, and harmless as an argument
    (probe,) = container_probes(ContainerDigest(image=image))
    assert probe.argv == ("sh", "-c", CONTAINER_SCRIPT, "nodecheck-container", image, "auto")
    assert image not in CONTAINER_SCRIPT and probe.argv[2] is CONTAINER_SCRIPT
    (sqsh,) = container_probes(ContainerDigest(image=SQSH, runtime="enroot"))
    assert sqsh.argv[3:] == ("nodecheck-container", SQSH, "file")
    assert (probe.name, probe.timeout_s) == ("container", 120)


# -- the probe run for real, with fake runtimes on PATH ---------------------------------------------------------


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path, monkeypatch) -> Path:
    """A PATH with the fakes first; docker/podman/enroot of this machine (if any) never answer."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def _run(want: ContainerDigest):
    (probe,) = container_probes(want)
    capture = LocalSession(Node("node1", "node1")).run(probe, 10)
    assert (capture.outcome, capture.exit_code) == (Outcome.EXITED, 0), capture
    return capture


@pytest.mark.skipif(not os.access("/bin/sh", os.X_OK), reason="no /bin/sh")
def test_docker_receives_the_image_as_one_argument_after_double_dash(bin_dir, tmp_path, monkeypatch):
    args = tmp_path / "args"
    inspect = tmp_path / "inspect.json"
    inspect.write_text(INSPECT)
    monkeypatch.setenv("FAKE_ARGS", str(args))
    monkeypatch.setenv("FAKE_INSPECT", str(inspect))
    _fake(bin_dir, "docker", 'printf "%s\\n" "$@" > "$FAKE_ARGS"\n/bin/cat "$FAKE_INSPECT"\n')
    image = "b10s/test:app4;touch${IFS}" + str(tmp_path / "pwned")
    capture = _run(ContainerDigest(image=image))
    assert args.read_text().splitlines() == ["image", "inspect", "--", image]
    assert not (tmp_path / "pwned").exists()
    assert capture.stdout == "@@nodecheck runtime docker\n" + section("inspect", INSPECT)
    # the same run, judged: a plain reference gets the registry digest
    capture = _run(ContainerDigest(image=IMAGE))
    assert fleet(ContainerDigest(image=IMAGE), [capture.stdout]) == [
        (("node1",), PASS, f"image {IMAGE_ID} (the only node judged; nothing to compare with)")
    ]


@pytest.mark.skipif(not os.access("/bin/sh", os.X_OK), reason="no /bin/sh")
def test_auto_without_docker_or_podman_says_none(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", str(empty))
    assert _run(ContainerDigest(image=IMAGE)).stdout == "@@nodecheck runtime none\n"
    assert _run(ContainerDigest(image=IMAGE, runtime="podman")).stdout == (
        "@@nodecheck runtime podman\n@@nodecheck missing podman\n"
    )


@pytest.mark.skipif(
    not os.access("/usr/bin/sha256sum", os.X_OK) and not os.access("/bin/sha256sum", os.X_OK), reason="no sha256sum"
)
def test_a_real_sqsh_file_is_hashed_on_the_node(bin_dir, tmp_path):
    image = tmp_path / "images" / "app -v2.sqsh"  # a space and a dash inside the name
    image.parent.mkdir()
    image.write_bytes(b"hsqs" + bytes(range(256)) * 64)
    want = ContainerDigest(image=str(image))
    expected = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    assert fleet(want, [_run(want).stdout]) == [
        (("node1",), PASS, f"image {expected} (the only node judged; nothing to compare with)")
    ]
    gone = ContainerDigest(image=str(tmp_path / "images" / "gone.sqsh"))
    assert fleet(gone, [_run(gone).stdout]) == [(("node1",), FAIL, f"{gone.image} not present on the node")]
