"""Parse container image facts (inspect JSON, sha256sum, enroot list)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

# re.ASCII throughout: a str pattern's \d and \w also match other scripts' characters.
_HEX64 = re.compile(r"[0-9a-f]{64}", re.ASCII)
_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
_REPO_DIGEST = re.compile(r"([^@\s\[\]\"]+)@(sha256:[0-9a-f]{64})", re.ASCII)

# Missing-image messages, docker then podman (the reference is group 1):
#   docker 1.x-20.x CLI       "Error: No such image: REF"               (gitlab-ci-local#655)
#   docker CLI, daemon text   "Error response from daemon: No such image: REF"   (python-on-whales#557)
#   `docker inspect` untyped  "Error: No such image or container: REF"  (moby#18424)
#   podman-hpc `inspect`      "Error: no such object: REF"              (NERSC/podman-hpc#148)
_DOCKER_MISSING = re.compile(
    r"Error(?: response from daemon)?: (?:No such image(?: or container)?|no such object): (\S+)"
)
# podman wraps its cause: "Error: inspecting object: unable to inspect "REF": failed to find image
# REF: REF: image not known"; the reference is always the segment just before "image not known"
_PODMAN_MISSING = re.compile(r"Error: (?:.*: )?([^\s:][^\s]*?): image not known")
# podman logs through logrus on stderr ("WARN[0000] ..."), which the probe captures with stdout;
# warnings and info say nothing about the image, while "ERRO[...]" lines are errors like any other
_LOGRUS_NOTICE = re.compile(r"(?:WARN|INFO|DEBU)\[\d+\] .*", re.ASCII)


@dataclass(frozen=True)
class ImageRecord:
    image_id: str  # "sha256:<64 hex>"; podman's bare hex gets the prefix
    repo_digests: tuple[str, ...]  # "registry/repo@sha256:<64 hex>", as printed
    repo_tags: tuple[str, ...]  # "ubuntu:22.04"


@dataclass(frozen=True)
class ImageMissing:
    """The runtime answered that the image is not there: a fact to judge, not an unreadable output."""

    reference: str  # as the error names it: "docker.io/x/y:1.0"
    message: str  # the error line as printed


@dataclass(frozen=True)
class Sha256Sums:
    sums: dict[str, str]  # path → 64 lowercase hex
    missing: tuple[str, ...]  # "No such file or directory"
    unreadable: dict[str, str]  # path → sha256sum's reason ("Permission denied", ...)


def parse_image_inspect(text: str) -> tuple[ImageRecord, ...] | ImageMissing:
    """`docker/podman image inspect IMAGE` JSON, or ImageMissing when the runtime has no such image."""
    tool = "image inspect"
    json_lines, missing = [], []
    for line in split_lines(text):
        stripped = line.strip()
        found = _missing(stripped)
        if found:
            missing.append(found)
        elif _LOGRUS_NOTICE.fullmatch(stripped):
            continue
        elif stripped.startswith(("Error", "ERRO[")):  # not "no such image": daemon down, ...
            raise ParseError(tool, f"unexpected error line {quote(stripped)}", text)
        else:
            json_lines.append(line)
    if missing:  # the job needs the image; the first one missing decides
        return missing[0]
    body = "\n".join(json_lines).strip()
    if not body:
        raise ParseError(tool, "empty output", text)
    try:
        data = json.loads(body)
    except ValueError as why:
        raise ParseError(tool, f"not JSON: {why}", text) from None
    if not isinstance(data, list):
        raise ParseError(tool, "expected a JSON array of images", text)
    if not data:
        # docker and podman print "[]" with the error on stderr; without that line the reference
        # that is missing is unknown, so this is not a fact a judge can name
        raise ParseError(tool, "empty array and no 'No such image' line (was stderr captured?)", text)
    return tuple(_image_record(item, text) for item in data)


def digest_of(record: ImageRecord, reference: str) -> str | None:
    """The "sha256:…" digest of the record's first repo digest in the reference's repository, else None."""
    found = digests_of(record, reference)
    return found[0] if found else None


def digests_of(record: ImageRecord, reference: str) -> tuple[str, ...]:
    """Every "sha256:…" digest the record holds for the reference's repository (podman lists the
    manifest list's and the platform manifest's digest for one repository)."""
    wanted = _repository(reference)
    found = []
    for entry in record.repo_digests:
        match = _REPO_DIGEST.fullmatch(entry)
        if match and _repository(match[1]) == wanted:
            found.append(match[2])
    return tuple(found)


def parse_sha256sum(text: str) -> Sha256Sums:
    """`sha256sum FILE...` (GNU or --tag lines, with stderr): sums, missing and unreadable paths."""
    tool = "sha256sum"
    sums: dict[str, str] = {}
    missing: list[str] = []
    unreadable: dict[str, str] = {}
    for line in split_lines(text):
        if not line.strip():
            continue
        entry = _sum_line(line)
        if entry is not None:
            path, digest = entry
            if sums.get(path, digest) != digest:
                raise ParseError(tool, f"two different sums for {quote(path)}", text)
            sums[path] = digest
            continue
        error = re.fullmatch(r"sha256sum: (.+): ([^:]+)", line)
        if not error:
            raise ParseError(tool, f"unexpected line {quote(line)}", text)
        if error[2] == "No such file or directory":
            missing.append(error[1])
        else:
            unreadable[error[1]] = error[2]
    if not (sums or missing or unreadable):
        raise ParseError(tool, "empty output", text)
    return Sha256Sums(sums, tuple(missing), unreadable)


def parse_enroot_list(text: str) -> tuple[str, ...]:
    """Names from `enroot list` (one per line) or `enroot list --fancy` (NAME column); () if none."""
    lines = [line.rstrip() for line in split_lines(text) if line.strip()]
    if lines and lines[0].split()[:2] == ["NAME", "SIZE"]:
        # --fancy: a container's extra processes continue on lines that start with spaces
        return tuple(line.split()[0] for line in lines[1:] if not line[0].isspace())
    for line in lines:
        # enroot prints the bare directory names; indentation or spaces mean another output
        if line != line.strip() or len(line.split()) != 1:
            raise ParseError("enroot list", f"not a container name: {quote(line)}", text)
    return tuple(lines)


def _missing(line: str) -> ImageMissing | None:
    match = _DOCKER_MISSING.fullmatch(line) or _PODMAN_MISSING.fullmatch(line)
    return ImageMissing(match[1].strip('"'), line) if match else None


def _image_record(item: object, text: str) -> ImageRecord:
    tool = "image inspect"
    if not isinstance(item, dict):
        raise ParseError(tool, "array item is not an object", text)
    image_id = item.get("Id")
    if not isinstance(image_id, str):
        raise ParseError(tool, 'image has no "Id" string', text)
    if _HEX64.fullmatch(image_id):  # podman prints the config digest without "sha256:"
        image_id = f"sha256:{image_id}"
    if not _IMAGE_ID.fullmatch(image_id):
        raise ParseError(tool, f'"Id" is not sha256:<64 hex>: {quote(image_id)}', text)
    digests = _string_list(item, "RepoDigests", text)
    for entry in digests:
        if not _REPO_DIGEST.fullmatch(entry):
            raise ParseError(tool, f"not a repo digest: {quote(entry)}", text)
    return ImageRecord(image_id, digests, _string_list(item, "RepoTags", text))


def _string_list(item: dict, key: str, text: str) -> tuple[str, ...]:
    if key not in item:
        raise ParseError("image inspect", f"image has no {key!r}", text)
    value = item[key]
    if value is None:  # Engine API 1.43 returns null for none (moby#45556)
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError("image inspect", f"{key!r} is not a list of strings", text)
    return tuple(value)


def _repository(reference: str) -> str:
    """The full repository a reference names: "ubuntu:22.04" → "docker.io/library/ubuntu"."""
    name = reference.split("@", 1)[0]
    if name.rfind(":") > name.rfind("/"):  # a tag; a ':' before the last '/' is a registry port
        name = name[: name.rfind(":")]
    first, _, rest = name.partition("/")
    # docker's rule: the first component is a registry only if it has a '.' or ':' or is localhost
    if rest and ("." in first or ":" in first or first == "localhost"):
        domain, path = first, rest
    else:
        domain, path = "docker.io", name
    if domain == "index.docker.io":
        domain = "docker.io"
    if domain == "docker.io" and "/" not in path:
        path = f"library/{path}"
    return f"{domain}/{path}"


def _sum_line(line: str) -> tuple[str, str] | None:
    """(path, digest) of a GNU ("hex  path", "hex *path") or --tag ("SHA256 (path) = hex") line."""
    # GNU coreutils starts a line with '\' when the name holds a newline or backslash, and escapes them
    escaped = line.startswith("\\")
    body = line[1:] if escaped else line
    gnu = re.fullmatch(r"([0-9a-f]{64}) [ *](.+)", body, re.ASCII)
    tag = re.fullmatch(r"SHA256 \((.+)\) = ([0-9a-f]{64})", body, re.ASCII)
    if gnu:
        path, digest = gnu[2], gnu[1]
    elif tag:
        path, digest = tag[1], tag[2]
    else:
        return None
    if escaped:
        path = re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r", "\\": "\\"}.get(m[1], m[0]), path)
    return path, digest
