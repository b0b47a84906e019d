"""Named threshold bands with units in the caller's keys; each judges one value into a Verdict."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

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


class Floor(_Band):
    """Higher is better: below fail_below fails, below warn_below warns."""

    fail_below: float
    warn_below: float | None = None

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
