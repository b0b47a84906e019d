"""Named threshold bands with units in the caller's keys; each judges one value into a Verdict."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from nodecheck.core.model import Status, Verdict


def fmt(value: Any) -> str:
    """Numbers without float noise: 400.0 → '400', 0.125 → '0.125'."""
    return f"{value:g}" if isinstance(value, float) else str(value)


class _Band(BaseModel):
    # NaN compares false with everything: a bound of .nan would pass every value, so bounds are finite
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def is_finite(value: Any) -> bool:
    """False only for a float NaN or infinity; other values are not numbers this module judges."""
    return not isinstance(value, float) or math.isfinite(value)


def _not_judged(value: Any, what: str, unit: str, subject: str, expected: dict) -> Verdict:
    """A non-finite measurement (a tool printed nan or inf) says nothing about health either way."""
    u = f" {unit}" if unit else ""
    return Verdict(
        Status.ERROR, f"{what} {value}{u}: not a finite number, cannot be judged", subject, {what: str(value)}, expected
    )


class Relative(_Band):
    """Fleet-relative: a value judged against its peers (the same test on the same hardware in
    the same run), so a GPU or node that is healthy by the fixed floor but clearly slower than
    its identical neighbours is still named. Applied by nodecheck/judging/relative.py; the check
    decides who the peers are. A fixed floor still judges alone where there are too few peers."""

    warn_below_pct: float | None = Field(
        None, gt=0, lt=100, description="WARN when this many percent below the peers' median (5 = 5 %)"
    )
    fail_below_pct: float | None = Field(
        None, gt=0, lt=100, description="FAIL when this many percent below the peers' median"
    )
    min_peers: int = Field(
        4,
        ge=2,
        le=100000,
        strict=True,
        description="fewer peers than this in the group: no relative verdict (the fixed floor only); "
        "a median of one or two others says little",
    )
    mad_k: float = Field(
        3.0,
        ge=0,
        le=1000,
        description="a value must also lie more than mad_k robust standard deviations (1.4826 x MAD) below "
        "the peers' median: a group that noisy cannot single out a value it cannot tell apart (0: off)",
    )
    history_warn_below_pct: float | None = Field(
        None,
        gt=0,
        lt=100,
        description="sweeps: WARN when this many percent below the node's own median of its recent sweeps",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Relative:
        if self.warn_below_pct is None and self.fail_below_pct is None and self.history_warn_below_pct is None:
            raise ValueError(
                "relative needs at least one of warn_below_pct, fail_below_pct, history_warn_below_pct "
                "(percent below the peers' median, e.g. {warn_below_pct: 5, fail_below_pct: 10})"
            )
        if (
            self.warn_below_pct is not None
            and self.fail_below_pct is not None
            and self.warn_below_pct > self.fail_below_pct
        ):
            raise ValueError(
                f"warn_below_pct ({fmt(self.warn_below_pct)}) must be <= fail_below_pct "
                f"({fmt(self.fail_below_pct)}): a value warns before it fails"
            )
        return self


class RelativeRepr(BaseModel):
    """A band that may carry `relative:`: without one it reads as it did before there was one (the
    checks reference prints defaults by repr)."""

    def __repr_args__(self) -> list[tuple[str | None, object]]:
        return [(k, v) for k, v in super().__repr_args__() if not (k == "relative" and v is None)]


class Floor(RelativeRepr, _Band):
    """Higher is better: below fail_below fails, below warn_below warns. `relative` is judged by
    the checks that compare nodes (nodecheck/judging/relative.py), never by judge()."""

    fail_below: float
    warn_below: float | None = None
    relative: Relative | None = Field(
        None,
        description="{warn_below_pct, fail_below_pct, min_peers, mad_k}: also judge the value against its "
        "peers' median in this run, where the check has peers",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Floor:
        if self.warn_below is not None and self.warn_below < self.fail_below:
            raise ValueError(f"warn_below ({fmt(self.warn_below)}) must be >= fail_below ({fmt(self.fail_below)})")
        return self

    def judge(self, value: float, *, what: str, unit: str, subject: str = "") -> Verdict:
        seen = f"{what} {fmt(value)} {unit}"
        observed, expected = {what: value}, {"min": self.fail_below}
        if not is_finite(value):
            return _not_judged(value, what, unit, subject, expected)
        if value < self.fail_below:
            return Verdict(
                Status.FAIL, f"{seen}, expected >= {fmt(self.fail_below)} {unit}", subject, observed, expected
            )
        if self.warn_below is not None and value < self.warn_below:
            return Verdict(
                Status.WARN,
                f"{seen}, expected >= {fmt(self.warn_below)} {unit}",
                subject,
                observed,
                {"min": self.warn_below},
            )
        return Verdict(
            Status.PASS, f"{seen} (>= {fmt(self.warn_below or self.fail_below)} {unit})", subject, observed, expected
        )


class Ceiling(_Band):
    """Lower is better: above fail_above fails, above warn_above warns."""

    fail_above: float
    warn_above: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Ceiling:
        if self.warn_above is not None and self.warn_above > self.fail_above:
            raise ValueError(f"warn_above ({fmt(self.warn_above)}) must be <= fail_above ({fmt(self.fail_above)})")
        return self

    def judge(self, value: float, *, what: str, unit: str, subject: str = "") -> Verdict:
        seen = f"{what} {fmt(value)} {unit}"
        observed, expected = {what: value}, {"max": self.fail_above}
        if not is_finite(value):
            return _not_judged(value, what, unit, subject, expected)
        if value > self.fail_above:
            return Verdict(
                Status.FAIL, f"{seen}, expected <= {fmt(self.fail_above)} {unit}", subject, observed, expected
            )
        if self.warn_above is not None and value > self.warn_above:
            return Verdict(
                Status.WARN,
                f"{seen}, expected <= {fmt(self.warn_above)} {unit}",
                subject,
                observed,
                {"max": self.warn_above},
            )
        limit = self.fail_above if self.warn_above is None else self.warn_above
        return Verdict(Status.PASS, f"{seen} (<= {fmt(limit)} {unit})", subject, observed, expected)


class Exact(_Band):
    """The value must equal the pinned one."""

    value: Any

    @model_validator(mode="after")
    def _finite(self) -> Exact:
        if not is_finite(self.value):
            raise ValueError(f"value must be a finite number, got {self.value}")
        return self

    def judge(self, value: Any, *, what: str, unit: str = "", subject: str = "") -> Verdict:
        u = f" {unit}" if unit else ""
        if not is_finite(value):
            return _not_judged(value, what, unit, subject, {what: self.value})
        if value != self.value:
            return Verdict(
                Status.FAIL,
                f"{what} {fmt(value)}{u}, expected {fmt(self.value)}{u}",
                subject,
                {what: value},
                {what: self.value},
            )
        return Verdict(Status.PASS, f"{what} {fmt(value)}{u}", subject, {what: value}, {what: self.value})


class OneOf(_Band):
    """The value must be one of the allowed ones."""

    values: tuple[Any, ...]

    @model_validator(mode="after")
    def _finite(self) -> OneOf:
        bad = next((v for v in self.values if not is_finite(v)), None)
        if bad is not None:
            raise ValueError(f"values must be finite numbers, got {bad}")
        return self

    def judge(self, value: Any, *, what: str, unit: str = "", subject: str = "") -> Verdict:
        allowed = ", ".join(fmt(v) for v in self.values)
        if not is_finite(value):
            return _not_judged(value, what, unit, subject, {what: list(self.values)})
        if value not in self.values:
            return Verdict(
                Status.FAIL,
                f"{what} {fmt(value)}, expected one of {allowed}",
                subject,
                {what: value},
                {what: list(self.values)},
            )
        return Verdict(Status.PASS, f"{what} {fmt(value)}", subject, {what: value}, {what: list(self.values)})


def _off_is_false(value: Any) -> Any:
    # YAML 1.1 reads a bare `off` as false; `drift: off` must mean "off", not a type error
    return "off" if value is False else value


# What a finding does to the verdict: fail, warn, or not judged. `off` may be written bare in YAML.
Action = Annotated[Literal["fail", "warn", "off"], BeforeValidator(_off_is_false)]
