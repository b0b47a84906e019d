"""Translation of a parsed NHC configuration: each directive dispatched to its translator, NHC's
settings noted or used, and every piece merged into its check's block and validated as it is."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from nodecheck.app.nhc_directives import TRANSLATORS, UNTRANSLATABLE
from nodecheck.app.nhc_model import BASELINE, Context, NoOp, Piece, Refused, Remark, Translation, Untranslated
from nodecheck.config.playbook import MAX_DEADLINE_S, CheckOptions
from nodecheck.parsers.nhc_conf import Directive, NhcConf, Word


def translate(conf: NhcConf, source: str, sha256: str = "", registry: Any = None) -> Translation:
    """Every directive of `conf` translated, refused or noted; `registry`: the checks to validate
    against (default: every registered check)."""
    if registry is None:
        from nodecheck.checks import all_checks

        registry = all_checks()
    result = Translation(source, sha256, conf.lines)
    for bad in conf.malformed:
        result.untranslated.append(Untranslated(bad.line, bad.text, bad.reason))
    context = Context()
    for directive in conf.directives:
        try:
            _translate_one(directive, context, result, registry)
        except Refused as e:
            result.untranslated.append(Untranslated(directive.line, directive.text, str(e)))
    for line, (name, pending) in context.settings.items():
        users = sorted(context.used.get(name, set()))
        if users:  # its value went into translated lines: that is its translation
            where = ", ".join(map(str, users))
            result.ignored.append(Remark(line, pending.text, f"{name}: its value is used by line {where}"))
        else:
            result.untranslated.append(pending)
    result.untranslated.sort(key=lambda u: u.line)
    result.ignored.sort(key=lambda r: r.line)
    return result


def _translate_one(d: Directive, ctx: Context, result: Translation, registry: Any) -> None:
    if d.kind == "setting":
        _setting(d, ctx, result)
        return
    if not d.target.every_host:
        raise Refused(
            f"runs only on hosts matching {d.target.raw!r}: a playbook's checks apply to every node it "
            "selects; put this check in a playbook of its own selected by those nodes' labels "
            "(select: {labels: [...]})"
        )
    if d.kind == "shell":
        raise Refused(f"shell code, not one NHC check call ({d.why}): translate it by hand")
    translator = TRANSLATORS.get(d.name)
    if translator is None:
        raise Refused(UNTRANSLATABLE.get(d.name, f"{d.name}: not an NHC check nodecheck knows (a site's own check?)"))
    ctx.reading = set()
    args = [_resolve(word, ctx, d) for word in d.args]
    try:
        pieces = translator(d.name, args, ctx, d)
    except NoOp as e:
        result.ignored.append(Remark(d.line, d.text, f"{e}: nothing to translate"))
        return
    for piece in pieces:
        _accept(piece, d, result, registry)
    for name in ctx.reading:
        ctx.used.setdefault(name, set()).add(d.line)


def _resolve(word: Word, ctx: Context, d: Directive) -> str:
    """The word's value: literal text, with $VAR from an earlier `* || VAR=value` line of this file."""
    out: list[str] = []
    for part in word.parts:
        if isinstance(part, str):
            out.append(part)
        elif part.name is not None and part.name in ctx.variables:
            out.append(ctx.variables[part.name])
            ctx.reading.add(part.name)
        else:
            what = "is computed on the node" if part.name is None else "is set outside this file"
            raise Refused(
                f"{part.raw} {what} (/etc/sysconfig/nhc, the environment or NHC itself): "
                "write its value in the line, then import again"
            )
    return "".join(out)


# NHC settings with no effect a nodecheck playbook could carry, and why each needs nothing
IGNORED_SETTINGS = {
    "NHC_RM": "the resource manager NHC drains through; nodecheck's gate is Slurm's (docs/slurm-gate.md)",
    "HOSTNAME": "the host name NHC matches targets against; only `*` lines translate",
    "HOSTNAME_S": "the host name NHC matches targets against; only `*` lines translate",
    "DEBUG": "NHC's debug output",
    "VERBOSE": "NHC's verbose output",
    "SILENT": "NHC's logging",
    "NHC_CHECK_ALL": "nodecheck always runs every check and reports each",
    "NHC_CHECK_FORKED": "nodecheck runs every probe in its own bounded process",
    "NHC_SID": "NHC's own process session",
    "FORCE_SETSID": "NHC's own process session",
}


def _setting(d: Directive, ctx: Context, result: Translation) -> None:
    value_word = d.args[0] if d.args else Word((), "")
    value = value_word.literal
    if d.target.every_host and value is not None:
        ctx.variables[d.name] = value
    if d.name == "TIMEOUT":
        if not d.target.every_host or value is None or not re.fullmatch(r"[0-9]{1,6}", value):
            raise Refused("TIMEOUT: only a whole number of seconds set for every host translates (deadline_s)")
        if not 0 < int(value) <= MAX_DEADLINE_S:
            raise Refused(f"TIMEOUT={value}: a deadline_s is 1 to {MAX_DEADLINE_S:g} seconds (0: NHC's no watchdog)")
        result.deadline_s = float(int(value))
        result.deadline_line = Remark(d.line, d.text, "NHC's watchdog: the playbook's deadline_s")
        return
    if d.name in IGNORED_SETTINGS:
        result.ignored.append(Remark(d.line, d.text, f"{d.name}: {IGNORED_SETTINGS[d.name]}; nothing to translate"))
        return
    if d.name == "MARK_OFFLINE":
        raise Refused(
            "MARK_OFFLINE: whether failing nodes are drained is not a playbook setting: "
            "run `nodecheck health --observe` (or the gate config's observe: true) to never drain"
        )
    # any other variable changes how NHC's checks run (DF_FLAGS, MAX_SYS_UID, PATH, ...), or holds a
    # value later lines use as $NAME: listed unless a translated line used it (translate() decides)
    reason = f"{d.name}: an NHC setting with no nodecheck counterpart (it changes how NHC's checks run)"
    if d.target.every_host and value is not None:
        ctx.settings[d.line] = (d.name, Untranslated(d.line, d.text, reason + ", and no translated line uses it"))
        return
    raise Refused(reason)


def _accept(piece: Piece, d: Directive, result: Translation, registry: Any) -> None:
    """Merge the piece into its check's block if the check exists and accepts the merged block."""
    spec = registry.get(piece.check)
    if spec is None and "." in piece.check:  # command.<label>: a template check, one block per label
        family = registry.get(piece.check.split(".", 1)[0])
        spec = family if getattr(family, "template", False) else None
    if spec is None:
        raise Refused(f"nodecheck has no {piece.check} check in this version")
    origins = result.origins.get(piece.check, [])
    current = result.checks.get(piece.check, {})
    try:
        merged = piece.block if piece.replace else _merge(current, piece.block)
    except _Conflict as e:
        lines = ", ".join(str(r.line) for r in origins)
        raise Refused(f"{piece.check}.{e.key} is {e.old!r} from line {lines} but {e.new!r} here") from None
    try:
        options = CheckOptions.model_validate({**BASELINE.get(piece.check, {}), **merged})
        spec.params.model_validate(options.model_extra or {})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Refused(f"{piece.check} refuses it: {where}: {first['msg']}") from None
    result.checks[piece.check] = merged
    result.origins.setdefault(piece.check, []).append(Remark(d.line, d.text, piece.note))


class _Conflict(Exception):
    def __init__(self, key: str, old: object, new: object) -> None:
        self.key, self.old, self.new = key, old, new
        super().__init__(key)


def _merge(base: Any, add: Any, key: str = "") -> Any:
    """`add` over `base`: mappings key by key, lists of {path: ...} entries by path, other lists as
    a union in order; two different scalars are a conflict."""
    if isinstance(base, dict) and isinstance(add, dict):
        out = dict(base)
        for k, v in add.items():
            out[k] = _merge(out[k], v, f"{key}.{k}" if key else k) if k in out else v
        return out
    if isinstance(base, list) and isinstance(add, list):
        out_list = list(base)
        for item in add:
            keyed = _entry_key(item)
            index = next((i for i, old in enumerate(out_list) if keyed and _entry_key(old) == keyed), None)
            if index is not None and keyed is not None:
                out_list[index] = _merge(out_list[index], item, f"{key}[{keyed[1]}]")
            elif item not in out_list:
                out_list.append(item)
        return out_list
    if base != add:
        raise _Conflict(key, base, add)
    return base


def _entry_key(item: Any) -> tuple[str, Any] | None:
    if isinstance(item, dict):
        for k in ("path", "name"):
            if k in item:
                return k, item[k]
    return None
