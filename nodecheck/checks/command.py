"""Custom checks: a site's own command, judged by exit code, a regular expression on its output, or
a number extracted from it against a band. A playbook names each one `command.<label>`; results,
drain reasons, history and the report carry that name like any other check's (docs/custom-checks.md).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nodecheck.core.bounded_search import MULTILINE, SearchTimeout, compile_pattern, search
from nodecheck.core.model import Probe, Status, Verdict, excerpt, quote
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Ceiling, Floor
from nodecheck.probes.command import OUTPUT_MAX, CommandRun, command_probe, parse_command_output

ARG_MAX_CHARS = 4096  # one argument; a longer one is a script, and a script is written with `sh`


def _pattern(value: str | None) -> str | None:
    """A regular expression is compiled when the playbook loads: a typo fails there, with its line.
    Compiled as the judge searches it (core.bounded_search: the `regex` module, with a timeout)."""
    if value is not None:
        try:
            compile_pattern(value, MULTILINE)
        except regex.error as e:
            raise ValueError(f"not a valid regular expression: {e}") from None
    return value


def _argument(value: str) -> str:
    # an argument reaches exec() as one C string: a NUL would cut it silently
    if "\0" in value:
        raise ValueError("an argument cannot contain a NUL byte")
    if len(value) > ARG_MAX_CHARS:
        raise ValueError(f"an argument is at most {ARG_MAX_CHARS} characters")
    return value


class ValueRule(BaseModel):
    """A number taken from the output and judged against a band."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    regex: str = Field(description="regular expression whose first group is the number, e.g. '(\\d+) MB free'")
    band: Floor | Ceiling = Field(
        description="{fail_below, warn_below} (higher is better) or {fail_above, warn_above} (lower is better)"
    )
    unit: str = Field("", max_length=20, description="unit printed after the number in messages")
    name: str = Field("value", max_length=60, description="what the number is, in messages")

    @field_validator("regex")
    @classmethod
    def _one_group(cls, value: str) -> str:
        _pattern(value)
        if compile_pattern(value).groups < 1:
            raise ValueError("the regex needs a group around the number: '(\\d+) MB'")
        return value


class CommandParams(BaseModel):
    """What to run and how its outcome is judged. `argv` is exec'd as given, never through a shell;
    a shell script is `sh: ...` together with `shell: true`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # required (the reference shows it so), unless the block gives `sh` instead: then it is null
    argv: list[str] | None = Field(
        min_length=1, max_length=256, description="the command and its arguments, run without a shell (or sh)"
    )
    sh: str | None = Field(
        None, min_length=1, max_length=ARG_MAX_CHARS, description="a shell script (sh -c); needs shell: true"
    )
    shell: bool = Field(False, strict=True, description="true to run `sh` through /bin/sh (pipes, globs, $VARS)")
    exit: list[int] = Field([0], min_length=1, description="exit codes that pass")
    match: str | None = Field(None, description="regular expression the output must contain (re.search, multiline)")
    no_match: str | None = Field(None, description="regular expression the output must not contain")
    value: ValueRule | None = Field(None, description="a number from the output judged against a band")
    fail_status: Literal["fail", "warn"] = Field(
        "fail", description="what a failed expectation gives: fail (drains in the gate) or warn (reported only)"
    )
    description: str = Field("", max_length=200, description="what the check proves, shown in its messages")

    @model_validator(mode="before")
    @classmethod
    def _sh_instead_of_argv(cls, data: object) -> object:
        if isinstance(data, dict) and "argv" not in data and "sh" in data:
            return {**data, "argv": None}
        return data

    @field_validator("argv")
    @classmethod
    def _arguments(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            for arg in value:
                _argument(arg)
            if not value[0]:
                raise ValueError("the command (argv[0]) is empty")
        return value

    @field_validator("sh")
    @classmethod
    def _script(cls, value: str | None) -> str | None:
        return None if value is None else _argument(value)

    @field_validator("match", "no_match")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        return _pattern(value)

    @model_validator(mode="after")
    def _one_command(self) -> CommandParams:
        if self.argv is None and self.sh is None:
            raise ValueError("give the command as argv: [cmd, arg, ...] (or sh: '...' with shell: true)")
        if self.argv is not None and self.sh is not None:
            raise ValueError("give argv or sh, not both")
        if self.sh is not None and not self.shell:
            raise ValueError("sh: runs a shell string; say shell: true to allow it, or write argv: [cmd, arg, ...]")
        if self.shell and self.sh is None:
            raise ValueError("shell: true goes with sh: '<script>'; argv is never run through a shell")
        return self

    def command(self) -> tuple[str, ...]:
        """What the probe execs on the node."""
        if self.sh is not None:
            return ("sh", "-c", self.sh, "nodecheck-custom")
        return tuple(self.argv or ())

    def shown(self) -> str:
        """The command as messages name it."""
        text = f"sh -c {shlex.quote(self.sh)}" if self.sh is not None else shlex.join(self.argv or ())
        return text if len(text) <= 80 else text[:80] + "…"


def _probes(params: CommandParams) -> list[Probe]:
    return [command_probe(params.command())]


@check("command", probes=_probes, params=CommandParams, template=True)
def command(out: Captures, want: CommandParams) -> Iterator[Verdict]:
    """A site's own command (playbook key command.<label>) judged by its exit code, a regular
    expression on its output, or a number from its output against a band."""
    [capture] = out.values()  # one probe, named per label by the playbook
    run = parse_command_output(capture.stdout)
    what = f"{want.description}: " if want.description else ""
    bad = Status.FAIL if want.fail_status == "fail" else Status.WARN
    seen = {"exit_code": run.exit_code, "command": list(want.command()), "output_cut": run.cut}
    shown = excerpt((f"[output cut at {OUTPUT_MAX} bytes, judged on what was kept]\n" if run.cut else "") + run.output)
    # the shell's own exit codes for "could not run it": the command was never judged
    not_run = {127: "command not found on the node", 126: "found but not executable"}
    if run.exit_code in not_run and run.exit_code not in want.exit:
        yield Verdict(
            Status.ERROR,
            f"{what}{want.shown()}: {not_run[run.exit_code]} (exit {run.exit_code})",
            observed=seen,
            expected={"exit": want.exit},
            excerpt=shown,
        )
        return
    try:
        verdicts = list(_judged(run, want, what, bad, seen, shown))
    except _NotJudged as e:
        yield Verdict(
            Status.ERROR,
            f"{what}{want.shown()}: the {e.field} pattern did not finish within {e.seconds:.2g} s on "
            f"{len(run.output.encode()):,} bytes of output: not judged (a pattern that backtracks: "
            "rewrite it without nested repeats)",
            observed=seen,
            expected={e.field: e.pattern},
            excerpt=shown,
        )
        return
    failed = [v for v in verdicts if v.status is not Status.PASS]
    if failed:
        yield from failed
        return
    checks = [f"exit {run.exit_code}"] + [v.message for v in verdicts if v.message]
    yield Verdict(
        Status.PASS,
        f"{what}{want.shown()}: " + ", ".join(checks),
        observed={**seen, **{k: v for x in verdicts for k, v in x.observed.items()}},
        expected={"exit": want.exit},
        excerpt=shown,
    )


def _judged(run: CommandRun, want: CommandParams, what: str, bad: Status, seen: dict, shown: str) -> Iterator[Verdict]:
    """One verdict per expectation; a PASS carries the short text the summary joins."""
    name = f"{what}{want.shown()}"
    if run.exit_code not in want.exit:
        first = next((ln.strip() for ln in run.output.splitlines() if ln.strip()), "no output")
        yield Verdict(
            bad,
            f"{name}: exit {run.exit_code}, expected {' or '.join(map(str, want.exit))}: {quote(first, 120)}",
            observed=seen,
            expected={"exit": want.exit},
            excerpt=shown,
        )
    if want.match is not None:
        if _search("match", want.match, run.output) is None:
            yield Verdict(
                bad,
                f"{name}: output does not match {quote(want.match)}",
                observed=seen,
                expected={"match": want.match},
                excerpt=shown,
            )
        else:
            yield Verdict(Status.PASS, f"output matches {quote(want.match)}")
    if want.no_match is not None:
        found = _search("no_match", want.no_match, run.output)
        if found is not None:
            yield Verdict(
                bad,
                f"{name}: output matches {quote(want.no_match)}, expected no match: {quote(found.group(0), 120)}",
                observed={**seen, "matched": found.group(0)[:200]},
                expected={"no_match": want.no_match},
                excerpt=shown,
            )
        else:
            yield Verdict(Status.PASS, f"output does not match {quote(want.no_match)}")
    if want.value is not None:
        yield _value(run, want.value, name, bad, seen, shown)


class _NotJudged(Exception):
    def __init__(self, field: str, pattern: str, seconds: float) -> None:
        super().__init__(field)
        self.field, self.pattern, self.seconds = field, pattern, seconds


def _search(field: str, pattern: str, output: str):
    """A multiline search bounded by the run's judging deadline (core.bounded_search)."""
    try:
        return search(pattern, output, MULTILINE)
    except SearchTimeout as e:
        raise _NotJudged(field, pattern, e.seconds) from None


def _value(run: CommandRun, rule: ValueRule, name: str, bad: Status, seen: dict, shown: str) -> Verdict:
    found = _search("value", rule.regex, run.output)
    text = found.group(1) if found is not None else None
    if text is None:  # no number is not a good number
        return Verdict(
            Status.ERROR,
            f"{name}: no {rule.name} in the output (regex {quote(rule.regex)} did not match)",
            observed=seen,
            expected={"regex": rule.regex},
            excerpt=shown,
        )
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        return Verdict(
            Status.ERROR,
            f"{name}: {rule.name} {quote(text)} is not a number",
            observed={**seen, rule.name: text},
            excerpt=shown,
        )
    judged = rule.band.judge(number, what=rule.name, unit=rule.unit)
    status = judged.status
    if status is Status.FAIL and bad is Status.WARN:
        status = Status.WARN  # fail_status: warn caps the band's verdict too
    if status is Status.PASS:
        return Verdict(Status.PASS, judged.message, observed={rule.name: number})
    return Verdict(
        status,
        f"{name}: {judged.message}",
        observed={**seen, rule.name: number},
        expected=dict(judged.expected),
        excerpt=shown,
    )
