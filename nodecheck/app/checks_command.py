"""`nodecheck checks`: every check with its description and parameters, as text."""
from __future__ import annotations


def list_checks() -> str:
    from nodecheck.checks import all_checks
    lines = []
    for name, spec in sorted(all_checks().items()):
        lines.append(f"{name}  ({spec.scope})  {spec.description}")
        for field, info in spec.params.model_fields.items():
            default = "required" if info.is_required() else f"default {info.default!r}"
            lines.append(f"    {field:<16} {_type_name(info.annotation):<28} {default:<24} "
                         f"{info.description or ''}".rstrip())
        lines.append(f"    {'timeout_s':<16} {'number':<28} {'probe default':<24} "
                     f"per-probe timeout for this check, seconds (0 < timeout_s <= 86400)")
        lines.append(f"    {'enabled':<16} {'true|false':<28} {'default True':<24} false turns the check off")
    return "\n".join(lines) + "\n"


def _type_name(annotation) -> str:
    """A parameter's type as an operator reads it: "InfiniBand|Ethernet|any", "number", "list of text"."""
    import typing
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin is typing.Union:                 # Optional[X]: the default says it may be unset
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    names = {float: "number", int: "integer", str: "text", bool: "true|false"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))
