"""`nodecheck import-nhc nhc.conf`: an LBNL NHC configuration translated into a playbook.

Each NHC directive (nodecheck.parsers.nhc_conf) becomes a contribution to one nodecheck check's
block; several lines may build one block (eight `check_hw_ib` lines: one `ib.ports` with eight
devices). Every contribution is validated against the check's own parameter model as it is merged,
so the playbook written always loads; a line whose contribution a check refuses, a line for some
hosts only, a check nodecheck does not have and NHC's own settings that nodecheck cannot honour are
listed with their line number and the reason, in the playbook's closing comments and on stderr.

What never translates, by design: NHC's repairs (`-r` restart, `-S` start, `-e`/`-E` actions,
`kill`): nodecheck judges and reports, a drain is the gate's decision (docs/slurm-gate.md).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from nodecheck.app.nhc_model import KIB, Translation
from nodecheck.app.nhc_render import render
from nodecheck.app.nhc_translate import translate
from nodecheck.core.errors import ConfigError
from nodecheck.parsers.nhc_conf import MAX_CONF_BYTES, NhcConfError, parse_nhc_conf

# ---------------------------------------------------------------- reading the file


def read_conf(path: str) -> tuple[str, str]:
    """(text, sha256) of an operator's nhc.conf: a regular file, at most MAX_CONF_BYTES, UTF-8 text;
    anything else is a ConfigError naming the file (and the line, where there is one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ConfigError(
            f"cannot read: {e.strerror or e}", file=path, hint="check the path and its permissions"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
            raise ConfigError("not a regular file", file=path, hint="give the path of the nhc.conf file itself")
        if info.st_size > MAX_CONF_BYTES:
            raise ConfigError(
                f"{info.st_size} bytes: larger than {MAX_CONF_BYTES // KIB} KiB, not an NHC configuration",
                file=path,
                hint="NHC configurations are a few KiB; check the path",
            )
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONF_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        raw = b"".join(chunks)
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", file=path) from None
    finally:
        os.close(fd)
    if len(raw) > MAX_CONF_BYTES:  # it grew while being read
        raise ConfigError(f"larger than {MAX_CONF_BYTES // KIB} KiB: not an NHC configuration", file=path)
    if b"\0" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
        raise ConfigError(
            "a NUL byte: a binary file, not an NHC configuration", file=path, line=line, hint="check the path"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x})",
            file=path,
            line=line,
            hint="a binary file is not an NHC configuration; convert a text file with iconv -t UTF-8",
        ) from None
    return text, hashlib.sha256(raw).hexdigest()


def import_nhc(path: str, registry: Any = None) -> tuple[Translation, str]:
    """The translation of the file at `path` and its playbook text ("" when nothing translated)."""
    text, digest = read_conf(path)
    try:
        conf = parse_nhc_conf(text)
    except NhcConfError as e:
        raise ConfigError(e.reason, file=path, line=e.line, hint="give the path of an NHC configuration") from None
    result = translate(conf, Path(path).name, digest, registry)
    if not result.checks:
        return result, ""
    text = render(result)
    if registry is None:
        verify(text)
    return result, text


def verify(text: str) -> None:
    """Load the playbook text as `nodecheck run` would; every block was validated as it was built,
    so a refusal here is nodecheck's bug, never the operator's input."""
    import tempfile

    from nodecheck.config.playbook import load_playbook

    with tempfile.TemporaryDirectory(prefix="nodecheck-import-nhc.") as folder:
        candidate = Path(folder) / "translated.yml"
        candidate.write_text(text, encoding="utf-8")
        try:
            load_playbook(str(candidate))
        except ConfigError as e:
            raise RuntimeError(f"import-nhc wrote a playbook nodecheck refuses: {e}") from e


def import_nhc_command(args: Any) -> int:
    """`nodecheck import-nhc FILE [-o OUT]`: the playbook to OUT (atomically) or stdout, every line
    not translated on stderr; exit 0 all translated, 3 some not, 2 none (nothing written)."""
    import sys

    from nodecheck.report.store import shared, why, write_atomic

    result, text = import_nhc(args.file)
    for item in result.untranslated:
        print(f"{args.file}:{item.line}: not translated: {item.reason}", file=sys.stderr)
    if not text:
        print(
            f"nodecheck: import-nhc: no line of {args.file} translates into a nodecheck check; nothing written",
            file=sys.stderr,
        )
        return result.exit_code
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        out = Path(args.output)
        if out.is_dir():
            raise ConfigError("is a directory", file=args.output, hint="give the playbook's file name, e.g. site.yml")
        try:
            write_atomic(out, text, shared())
        except OSError as e:
            raise ConfigError(f"cannot write: {why(e)}", file=args.output) from None
    translated = sum(len(v) for v in result.origins.values())
    print(
        f"nodecheck: import-nhc: {translated} line(s) translated into {len(result.checks)} check(s), "
        f"{len(result.untranslated)} not translated"
        + (f"; playbook written to {args.output}" if args.output not in (None, "-") else ""),
        file=sys.stderr,
    )
    return result.exit_code
