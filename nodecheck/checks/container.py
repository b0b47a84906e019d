"""The container image the job will run: present on every node, with the same digest everywhere.

A node with a stale image runs another NCCL than the other 511 and the job hangs at rendezvous
with no error; a node without the image pulls it (slowly) or fails at start.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from nodecheck.checks.values import value_check
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import Absent, PinOrDrift
from nodecheck.parsers.containers import (
    ImageMissing,
    digests_of,
    parse_enroot_list,
    parse_image_inspect,
    parse_sha256sum,
)
from nodecheck.parsers.sections import split_sections

Runtime = Literal["auto", "docker", "podman", "enroot", "apptainer"]

# $1 is the image, $2 the runtime: passed as arguments (quoted once, in transport), never pasted
# into the script text.
CONTAINER_SCRIPT = r"""
img=$1 rt=$2
section() { n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; echo "@@nodecheck end $n rc=$?"; }
if [ "$rt" = auto ]; then
  if command -v docker >/dev/null 2>&1; then rt=docker
  elif command -v podman >/dev/null 2>&1; then rt=podman
  else rt=none; fi
fi
echo "@@nodecheck runtime $rt"
case $rt in
  docker|podman)
    command -v "$rt" >/dev/null 2>&1 || { echo "@@nodecheck missing $rt"; exit 0; }
    section inspect "$rt" image inspect -- "$img" ;;
  file)
    section sha256 sha256sum -- "$img" ;;
  enroot)
    command -v enroot >/dev/null 2>&1 || { echo "@@nodecheck missing enroot"; exit 0; }
    section enroot-list enroot list ;;
esac
exit 0
"""


class ContainerDigest(PinOrDrift):
    """Which image, through which runtime, plus the pin/drift rule for its digest."""

    image: str = Field(
        ...,
        description="what the job runs: a registry reference (registry.local/train:24.10) "
        "for docker/podman, a .sqsh file (enroot/pyxis), a .sif file (apptainer), or an "
        "enroot container name",
    )
    runtime: Runtime = Field(
        "auto", description="auto: docker, else podman, for a reference; sha256 of the file for .sqsh/.sif"
    )

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not value.strip() or value.startswith("-") or any(c in value for c in "\n\r\0"):
            raise ValueError(f"not an image reference or path: {value!r}")
        return value

    @model_validator(mode="after")
    def _runtime_fits_image(self) -> ContainerDigest:
        path = self.image.startswith("/")
        if path and self.runtime in ("docker", "podman"):
            raise ValueError(f"{self.runtime} takes an image reference, not a file path ({self.image})")
        if not path and self.runtime == "apptainer":
            raise ValueError(f"apptainer images are files: give the .sif path, got {self.image!r}")
        return self

    @property
    def mode(self) -> str:
        """What the probe does: docker | podman | auto (image inspect), file (sha256 of a
        .sqsh/.sif), enroot (an enroot container name: presence only)."""
        if self.image.startswith("/"):
            return "file"
        return "enroot" if self.runtime == "enroot" else self.runtime


def container_probes(want: ContainerDigest) -> list[Probe]:
    return [
        Probe("container", ("sh", "-c", CONTAINER_SCRIPT, "nodecheck-container", want.image, want.mode), timeout_s=120)
    ]  # hashing a 20 GB squashfs takes a while


_HEX64 = re.compile(r"^sha256:[0-9a-f]{64}$")


@value_check(
    "container.digest",
    what="image",
    probes=container_probes,
    params=ContainerDigest,
    doc="The job's container image is on every node, with the pinned digest and/or the same digest everywhere.",
)
def digest(out: Captures, want: ContainerDigest) -> str:
    text = out["container"].stdout
    sections = split_sections(text, "container probe")
    runtime = sections.facts.get("runtime", "?")
    if runtime == "none":
        raise Absent(f"{want.image}: no container runtime (docker, podman) on the node")
    if "missing" in sections.facts:
        raise Absent(f"{want.image}: {sections.facts['missing']} not installed on the node")
    if runtime in ("docker", "podman"):
        section = sections.require("inspect", f"{runtime} image inspect")
        parsed = parse_image_inspect(section.text)
        if isinstance(parsed, ImageMissing):
            raise Absent(f"{want.image} not present in {runtime} (the job would pull it or fail)")
        if section.rc != 0:
            raise ParseError(f"{runtime} image inspect", f"exit {section.rc}", section.text)
        if not parsed:
            raise ParseError(f"{runtime} image inspect", "no image in the output", section.text)
        record = parsed[0]
        # The image ID (the config's sha256) is the same wherever the same image sits, however it
        # was pulled; repo digests are not (a manifest list's and a platform manifest's digest, in
        # an order that depends on the pull). A pin may still name a repo digest this image has.
        pinned = [d for d in digests_of(record, want.image) if d in want.allowed]
        return pinned[0] if pinned else record.image_id
    if runtime == "file":
        section = sections.require("sha256", "sha256sum")
        sums = parse_sha256sum(section.text)
        if want.image in sums.unreadable:
            # the file is there but cannot be read ("Permission denied"): not judged, never "absent"
            raise ParseError("sha256sum", f"{want.image}: {sums.unreadable[want.image]}", section.text)
        if want.image in sums.missing or (section.rc != 0 and want.image not in sums.sums):
            raise Absent(f"{want.image} not present on the node")
        if want.image not in sums.sums:
            raise ParseError("sha256sum", f"no checksum for {want.image}", section.text)
        return "sha256:" + sums.sums[want.image]
    if runtime == "enroot":
        section = sections.require("enroot-list", "enroot list")
        if section.rc != 0:
            raise ParseError("enroot list", f"exit {section.rc}", section.text)
        if want.image not in parse_enroot_list(section.text):
            raise Absent(f"enroot container {want.image} not present on the node")
        # enroot keeps no digest for a created container; presence is all it can prove
        return "present (enroot container; pin a .sqsh file to compare content)"
    raise ParseError("container probe", f"unknown runtime {runtime!r}", text)
