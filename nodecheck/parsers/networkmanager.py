"""Which netdevs NetworkManager manages: `nmcli -t` device states and `unmanaged-devices` config.

NetworkManager taking a RoCE netdev's address away while the port flaps makes the kernel delete and
re-add that address's GIDs, which can land at new indices (incident 2 in
/work/shared/context/incidents.md). So a RoCE netdev that NetworkManager manages is worth a warning.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

# nmcli(1) -e/--escape (default yes): in terse mode ':' and '\' inside a value are escaped with '\'.

# NetworkManager.conf(5) "Device List Format": specs are separated by ',' or ';' (a backslash
# escapes them), whitespace around a spec is trimmed, and \s \t \n \\ stand for characters.
_SPEC = re.compile(r"(?:\\.|[^\\,;])+")
_SPEC_ESCAPES = {"s": " ", "t": "\t", "n": "\n"}
_SPEC_ESCAPE = re.compile(r"\\(.)")
_HWADDR = re.compile(r"[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2})+")
_KEY = "unmanaged-devices"
_GROUP = re.compile(r"\[[^\[\]]+\]")


def parse_nmcli_devices(text: str) -> dict[str, str]:
    """{device: state} from `nmcli -t -f DEVICE,TYPE,STATE device`: {"ens7f0np0": "connected"}."""
    states: dict[str, str] = {}
    for line in split_lines(text):
        if not line.strip():
            continue
        if line.startswith("Error:"):  # "Error: NetworkManager is not running."
            raise ParseError("nmcli", f"nmcli failed: {quote(line.strip())}", text)
        fields = _terse_fields(line)
        if len(fields) != 3 or not fields[0]:
            raise ParseError("nmcli", f"expected DEVICE:TYPE:STATE, got {quote(line)}", text)
        device, _type, state = fields
        if device in states:
            raise ParseError("nmcli", f"device {quote(device)} listed twice", text)
        states[device] = state
    if not states:
        raise ParseError("nmcli", "empty output", text)
    return states


def unmanaged_devices(*conf_texts: str) -> list[str]:
    """The `[keyfile] unmanaged-devices` specs of NetworkManager.conf and conf.d files.

    Give the files in NetworkManager's load order: a later `unmanaged-devices=` replaces the list,
    `unmanaged-devices+=` appends to it and `-=` removes from it (NetworkManager.conf(5)).
    Devices made unmanaged by a `[device*]` section (`managed=false`) are not read here.
    """
    specs: list[str] = []
    for text in conf_texts:
        keyfile = _keyfile_section(text)
        if _KEY in keyfile:
            specs = _split_specs(keyfile[_KEY])
        specs += [s for s in _split_specs(keyfile.get(_KEY + "+", "")) if s not in specs]
        removed = _split_specs(keyfile.get(_KEY + "-", ""))
        specs = [s for s in specs if s not in removed]
    return specs


def is_unmanaged(netdev: str, specs: Sequence[str]) -> bool:
    """Whether `specs` unmanage the netdev named `netdev`, judged by its name alone.

    `mac:`, `type:`, `driver:` and other non-name specs (see `specs_not_by_name`) never match
    here: deciding them needs facts about the device this function does not have.
    """
    positives = [s for s in specs if not s.startswith("except:")]
    negatives = [s[len("except:") :] for s in specs if s.startswith("except:")]
    if any(_matches_name(netdev, spec) for spec in negatives):
        return False  # a negative match wins over any positive one
    if any(_matches_name(netdev, spec) for spec in positives):
        return True
    return bool(negatives) and not positives  # only "except:" specs: as if "*" were listed too


def specs_not_by_name(specs: Sequence[str]) -> list[str]:
    """The specs `is_unmanaged` cannot decide (mac:, type:, driver:, a bare MAC, ...)."""
    return [s for s in specs if _name_spec(s.removeprefix("except:")) is None]


def _terse_fields(line: str) -> list[str]:
    """Split on ':' that is not escaped, and undo the escapes."""
    fields, current, chars = [], [], iter(line)
    for char in chars:
        if char == "\\":
            current.append(next(chars, "\\"))
        elif char == ":":
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
    fields.append("".join(current))
    return fields


def _keyfile_section(text: str) -> dict[str, str]:
    """The [keyfile] group's keys, read by GKeyFile's rules (GLib gkeyfile.c): one line at a time
    ('\\n' only), '#' comment lines, '[group]' lines, `key=value` with the spaces around '=' dropped,
    keys case sensitive, a later value winning. Not configparser: its option regex (a lazy `.*?`
    before `\\s*=`) is quadratic on a line holding a long run of spaces."""
    tool = "NetworkManager.conf"
    keys: dict[str, str] = {}
    group: str | None = None
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            if not _GROUP.fullmatch(stripped):
                raise ParseError(tool, f"not a key file: line {number}: not a [group] line: {quote(stripped)}", text)
            group = stripped[1:-1]
            continue
        key, equals, value = stripped.partition("=")
        if group is None:
            raise ParseError(tool, f"not a key file: line {number}: a key before any [group]", text)
        if not equals or not key.strip():
            raise ParseError(tool, f"not a key file: line {number}: not a key=value line: {quote(stripped)}", text)
        if group == "keyfile":
            # "unmanaged-devices+=x" reads as key "unmanaged-devices+" with value "x"
            keys[key.strip()] = value.strip()
    return keys


def _split_specs(value: str) -> list[str]:
    specs = []
    for match in _SPEC.finditer(value):
        spec = match.group().strip()
        if spec:
            specs.append(_SPEC_ESCAPE.sub(lambda m: _SPEC_ESCAPES.get(m[1], m[1]), spec))
    return specs


def _name_spec(spec: str) -> tuple[str, bool] | None:
    """(pattern, is_glob) for a spec that names interfaces; None for one that does not."""
    if spec == "*":
        return "*", True
    if spec.startswith("interface-name:="):
        return spec[len("interface-name:=") :], False
    if spec.startswith("interface-name:"):
        return spec[len("interface-name:") :].removeprefix("~"), True
    if ":" in spec or _HWADDR.fullmatch(spec):
        return None  # mac:, type:, driver:, ..., or a bare HWADDR
    return spec, False  # a bare IFNAME: literal, no globbing


def _matches_name(netdev: str, spec: str) -> bool:
    named = _name_spec(spec)
    if named is None:
        return False
    pattern, is_glob = named
    if not is_glob:
        return netdev == pattern
    # NetworkManager globs with '*' and '?' only: a '[' is literal there, so fnmatch must not
    # read it as a character class
    return fnmatch.fnmatchcase(netdev, pattern.replace("[", "[[]"))
