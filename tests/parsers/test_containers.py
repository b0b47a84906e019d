"""Container parsers on each documented form. (The container-digests/ files and the pyxis-enroot/ logs
are recordings kept for a future reader: the parsers of the `images --digests` tables and of the
`--format '{{.RepoDigests}}'` template, which nothing called, were removed in issue 32; container.digest
reads `image inspect` JSON.)"""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.containers import (
    ImageMissing,
    ImageRecord,
    Sha256Sums,
    digest_of,
    digests_of,
    parse_enroot_list,
    parse_image_inspect,
    parse_sha256sum,
)

# -- docker / podman image inspect ----------------------------------------------------------------

# Shape: docs.docker.com/reference/cli/docker/image/inspect/ ("docker image inspect" prints a JSON
# array, one object per image, with "Id", "RepoTags", "RepoDigests"). Values from a real
# `docker inspect 2082abcb0e0a` paste (gist.github.com/b10s/f9216964423626b8999944574b189ae7,
# 2018); the paste elides the rest of the object with "...", so it is closed after "Parent".
DOCKER_INSPECT = """[
    {
        "Id": "sha256:2082abcb0e0a78964ad616b21c3b2af7c905dc33ce9d1316f0c7bddef787148e",
        "RepoTags": [
            "b10s/test:app4"
        ],
        "RepoDigests": [
            "b10s/test@sha256:ef50faba170ccd35bd5f2b026a888aa7c43ee06373b9837d7f6290d2719851a1"
        ],
        "Parent": "sha256:105b2239b4c42b116e5e096dec69ee165d5cd9282590257fab5dc8dea40fde97"
    }
]
"""
# podman-image-inspect(1) EXAMPLE (manpages.ubuntu.com, jammy, podman 3.4.4): "Id" without
# "sha256:", a "Digest" key, and two digests for one repository; cut after "Created" here.
PODMAN_INSPECT = """[
    {
        "Id": "37e5619f4a8ca9dbc4d6c0ae7890625674a10dbcfb76201399e2aaddb40da17d",
        "Digest": "sha256:1b0d4ddd99b1a8c8a80e885aafe6034c95f266da44ead992aab388e6aa91611a",
        "RepoTags": [
            "registry.fedoraproject.org/fedora:latest"
        ],
        "RepoDigests": [
            "registry.fedoraproject.org/fedora@sha256:1b0d4ddd99b1a8c8a80e885aafe6034c95f266da44ead992aab388e6aa91611a",
            "registry.fedoraproject.org/fedora@sha256:b5290db40008aae9272ad3a6bd8070ef7ecd547c3bef014b894c327960acc582"
        ],
        "Parent": "",
        "Created": "2021-08-09T05:48:47Z"
    }
]
"""
FEDORA_LIST = "sha256:1b0d4ddd99b1a8c8a80e885aafe6034c95f266da44ead992aab388e6aa91611a"
FEDORA_AMD64 = "sha256:b5290db40008aae9272ad3a6bd8070ef7ecd547c3bef014b894c327960acc582"


def test_docker_image_inspect():
    assert parse_image_inspect(DOCKER_INSPECT) == (
        ImageRecord(
            "sha256:2082abcb0e0a78964ad616b21c3b2af7c905dc33ce9d1316f0c7bddef787148e",
            ("b10s/test@sha256:ef50faba170ccd35bd5f2b026a888aa7c43ee06373b9837d7f6290d2719851a1",),
            ("b10s/test:app4",),
        ),
    )


def test_podman_image_inspect_id_gets_the_sha256_prefix():
    (record,) = parse_image_inspect(PODMAN_INSPECT)
    assert record.image_id == "sha256:37e5619f4a8ca9dbc4d6c0ae7890625674a10dbcfb76201399e2aaddb40da17d"
    assert record.repo_tags == ("registry.fedoraproject.org/fedora:latest",)
    assert len(record.repo_digests) == 2
    assert digests_of(record, "registry.fedoraproject.org/fedora:latest") == (FEDORA_LIST, FEDORA_AMD64)
    assert digest_of(record, "registry.fedoraproject.org/fedora") == FEDORA_LIST


def test_null_repo_digests_reads_as_none():
    # Engine API 1.43 (docker 24.0) returns "RepoDigests": null for a local build (moby/moby#45556)
    text = DOCKER_INSPECT.replace(
        '[\n            "b10s/test@sha256:ef50faba170ccd35bd5f2b026a888aa7c43ee06373b9837d7f6290d2719851a1"\n        ]',
        "null",
    )
    assert "null" in text
    (record,) = parse_image_inspect(text)
    assert record.repo_digests == ()


# Missing-image outputs as posted (stdout "[]" and the stderr line, in the order shown):
MISSING = {
    # firecow/gitlab-ci-local#655, docker
    "[]\nError: No such image: docker.io/tmknom/markdownlint:0.32.2\n": "docker.io/tmknom/markdownlint:0.32.2",
    # firecow/gitlab-ci-local#655, podman
    '[]\nError: inspecting object: unable to inspect "docker.io/tmknom/markdownlint:0.32.2": failed to '
    "find image docker.io/tmknom/markdownlint:0.32.2: docker.io/tmknom/markdownlint:0.32.2: "
    "image not known\n": "docker.io/tmknom/markdownlint:0.32.2",
    # gabrieldemarmiesse/python-on-whales#557, docker with the daemon's wording
    "[]\nError response from daemon: No such image: hello:latest\n": "hello:latest",
    # moby/moby#18424, docker 1.9 prints the error before "[]"
    "Error: No such image: 2b81d178e32a\n[]\n": "2b81d178e32a",
    # containers/podman-compose#631, podman 4.3.1 `inspect -t image`
    "Error: inspecting object: stomppip_stompwheel: image not known\n": "stomppip_stompwheel",
    # podman's wording of podman-compose#631 without the "inspecting object:" wrapper
    "[]\nError: nvcr.io/nvidia/pytorch:24.05-py3: image not known\n": "nvcr.io/nvidia/pytorch:24.05-py3",
    # NERSC/podman-hpc#148
    "[]\nError: no such object: myimage\n": "myimage",
}


@pytest.mark.parametrize("text", sorted(MISSING))
def test_missing_image_is_a_result_not_an_error(text):
    result = parse_image_inspect(text)
    assert isinstance(result, ImageMissing)
    assert result.reference == MISSING[text]
    assert result.message in text.splitlines()


def test_podman_warnings_around_the_json_are_skipped():
    # rootless podman prints logrus warnings on stderr, which the probe captures with stdout
    # (wording of podman's "WARN[0000] ..." lines as in containers/podman#11363)
    text = (
        'WARN[0000] "/" is not a shared mount, this could cause issues or missing mounts with '
        "rootless containers\n" + PODMAN_INSPECT
    )
    (record,) = parse_image_inspect(text)
    assert record.repo_tags == ("registry.fedoraproject.org/fedora:latest",)


def test_podman_storage_error_is_unreadable():
    # containers/podman#11363 (2021-08-30): a broken image store, not a missing image
    text = (
        "WARN[0000] error determining if an image is a manifest list: error locating item named "
        '"manifest" for image with ID '
        '"a249f971778eb31c10a8fb97f7a3c54f8549731ccac39accd0c02f358cb589ad": '
        "file does not exist, ignoring the error \n"
        'Error: error locating item named "manifest" for image with ID '
        '"a249f971778eb31c10a8fb97f7a3c54f8549731ccac39accd0c02f358cb589ad": file does not exist\n'
    )
    with pytest.raises(ParseError, match="unexpected error line"):
        parse_image_inspect(text)


def test_missing_wins_over_found_records():
    # `docker image inspect a b` prints the found one and an error line for the other
    result = parse_image_inspect(DOCKER_INSPECT + "Error: No such image: b:1\n")
    assert result == ImageMissing("b:1", "Error: No such image: b:1")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("[]\n", "empty array"),
        (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
            "not JSON",
        ),
        ("Error: permission denied while trying to connect\n", "unexpected error line"),
        ('{"Id": "sha256:x"}', "JSON array"),
        ('[{"RepoTags": [], "RepoDigests": []}]', '"Id"'),
        ('[{"Id": "sha256:2082abcb", "RepoTags": [], "RepoDigests": []}]', "sha256:<64 hex>"),
        ('[{"Id": "sha256:' + "a" * 64 + '", "RepoTags": []}]', "RepoDigests"),
        (
            '[{"Id": "sha256:' + "a" * 64 + '", "RepoTags": [], "RepoDigests": ["b10s/test@sha256:ef50"]}]',
            "not a repo digest",
        ),
        (DOCKER_INSPECT[:200], "not JSON"),  # cut mid-object
    ],
)
def test_image_inspect_unreadable(text, reason):
    with pytest.raises(ParseError, match=reason.replace("(", r"\(")) as caught:
        parse_image_inspect(text)
    assert caught.value.tool == "image inspect"


# -- digest_of ----------------------------------------------------------------------------------

UBUNTU = ImageRecord(
    "sha256:" + "1" * 64,
    ("ubuntu@sha256:" + "2" * 64, "registry.example.com:5000/ubuntu@sha256:" + "3" * 64),
    ("ubuntu:22.04",),
)


@pytest.mark.parametrize(
    "reference, digest",
    [
        ("ubuntu:22.04", "sha256:" + "2" * 64),
        ("ubuntu", "sha256:" + "2" * 64),
        ("docker.io/library/ubuntu:22.04", "sha256:" + "2" * 64),
        ("index.docker.io/library/ubuntu", "sha256:" + "2" * 64),
        ("ubuntu@sha256:" + "9" * 64, "sha256:" + "2" * 64),  # pinned elsewhere: still this repository
        ("registry.example.com:5000/ubuntu:22.04", "sha256:" + "3" * 64),  # a port is not a tag
        ("library/ubuntu", "sha256:" + "2" * 64),
        ("nvcr.io/nvidia/ubuntu", None),
        ("someone/ubuntu", None),
    ],
)
def test_digest_of(reference, digest):
    assert digest_of(UBUNTU, reference) == digest


def test_digest_of_containerd_store_form():
    # docker with the containerd image store lists full names: "docker.io/library/ubuntu@sha256:…"
    record = ImageRecord("sha256:" + "1" * 64, ("docker.io/library/ubuntu@sha256:" + "4" * 64,), ())
    assert digest_of(record, "ubuntu:22.04") == "sha256:" + "4" * 64


# -- sha256sum ----------------------------------------------------------------------------------

# GNU coreutils manual, "md5sum invocation" (shared by sha256sum): each line is the checksum, a
# space, ' ' (text) or '*' (binary), and the name; --tag prints "SHA256 (name) = checksum"; a name
# with a newline or backslash is escaped and the line starts with '\'. Errors go through error(3):
# "sha256sum: NAME: strerror". The sum is sha256 of the empty file.
EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_sha256sum_forms():
    text = (
        f"{EMPTY}  /shared/images/pytorch.sqsh\n"
        f"{EMPTY} */shared/images/binary mode.sqsh\n"
        f"SHA256 (/shared/images/tagged.sqsh) = {EMPTY}\n"
        f"\\{EMPTY}  /shared/images/back\\\\slash\\nnewline.sqsh\n"
        "sha256sum: /shared/images/gone.sqsh: No such file or directory\n"
        "sha256sum: /root/secret.sqsh: Permission denied\n"
        "sha256sum: /shared/images: Is a directory\n"
    )
    assert parse_sha256sum(text) == Sha256Sums(
        sums={
            "/shared/images/pytorch.sqsh": EMPTY,
            "/shared/images/binary mode.sqsh": EMPTY,
            "/shared/images/tagged.sqsh": EMPTY,
            "/shared/images/back\\slash\nnewline.sqsh": EMPTY,
        },
        missing=("/shared/images/gone.sqsh",),
        unreadable={"/root/secret.sqsh": "Permission denied", "/shared/images": "Is a directory"},
    )


def test_sha256sum_all_missing():
    result = parse_sha256sum("sha256sum: /x.sqsh: No such file or directory\n")
    assert result == Sha256Sums({}, ("/x.sqsh",), {})


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        (f"{EMPTY[:40]}", "unexpected line"),  # cut mid-sum
        (f"{EMPTY.upper()}  /a\n", "unexpected line"),
        (f"{EMPTY}  /a\n{'0' * 64}  /a\n", "two different sums"),
        ("bash: sha256sum: command not found\n", "unexpected line"),
    ],
)
def test_sha256sum_unreadable(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_sha256sum(text)


# -- enroot list --------------------------------------------------------------------------------

# NVIDIA/enroot doc/cmd/list.md: "List all the container root filesystems on the system", one name
# per line; the doc's --fancy example, whose names are used for the plain form too.
ENROOT_FANCY = """NAME       SIZE  PID    STATE  STARTED   TIME   MNTNS       USERNS      COMMAND
alpine     5.9M
busybox    1.3M
centos     235M  24353  S+     05:39:23  06:54  4026533442  4026533441  -sh
                 24522  S+     05:39:31  06:46  4026533439  4026533438  -sh
ubuntu     70M   24733  S+     05:39:48  06:29  4026533445  4026533444  sleep infinity
"""


def test_enroot_list():
    assert parse_enroot_list("alpine\nbusybox\ncentos\nubuntu\n") == ("alpine", "busybox", "centos", "ubuntu")
    assert parse_enroot_list("pyxis_19.0\n") == ("pyxis_19.0",)
    assert parse_enroot_list("") == ()  # no container root filesystems


def test_enroot_list_fancy():
    assert parse_enroot_list(ENROOT_FANCY) == ("alpine", "busybox", "centos", "ubuntu")


@pytest.mark.parametrize("text", ["alpine\n    24522  S+\n", "alpine 5.9M\n"])
def test_enroot_list_unreadable(text):
    with pytest.raises(ParseError, match="not a container name"):
        parse_enroot_list(text)
