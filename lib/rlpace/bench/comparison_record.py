"""Read the comparison JSON a benchmark artifact carries, trusting none of it.

The ``pr`` pipeline writes ``<set>.json`` next to its rendered reports: the
:meth:`~rlpace.bench.comparison.Comparison.to_dict` layout plus a ``pipeline`` block
(or, for a skipped set, a ``rlpace-pr-skipped`` record). On a pull request that file
comes from the pull request's own code, so the trusted comment job reads it here:

- at most :data:`MAX_RECORD_BYTES` bytes, UTF-8, strict JSON (no ``NaN``, no
  duplicate keys, no absurd nesting);
- validated against :data:`COMPARISON_SCHEMA` or :data:`SKIPPED_SCHEMA` (jsonschema):
  every field typed, every string and list length-capped, at most
  :data:`MAX_ROWS` rows;
- turned back into a :class:`~rlpace.bench.comparison.Comparison` (the inverse of
  ``to_dict``) that the renderer formats; nothing in the file is ever posted as
  markdown.

Every refusal is a :class:`~rlpace.bench.errors.BenchInputError` with one line that
names the file, the place in it and what was expected, never the offending value.

Example:
    >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    >>> data = Comparison(rows=(BenchmarkChange("t::a", "a", Verdict.NEW),)).to_dict()
    >>> data["pipeline"] = {"set": "cpu"}
    >>> record = record_from_dict(data, source="cpu.json")
    >>> record.set_name, record.comparison.rows[0].verdict
    ('cpu', <Verdict.NEW: 'new'>)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from rlpace.bench.comparison import COMPARISON_FORMAT_VERSION, BenchmarkChange, Comparison, Verdict
from rlpace.bench.controls import NoiseFloor
from rlpace.bench.errors import BenchInputError

__all__ = [
    "COMPARISON_SCHEMA",
    "MAX_RECORD_BYTES",
    "MAX_ROWS",
    "SKIPPED_SCHEMA",
    "ComparisonRecord",
    "load_record",
    "record_from_dict",
]

#: The largest ``<set>.json`` the comment job reads.
MAX_RECORD_BYTES = 4 * 1024 * 1024
#: The most benchmark rows one record may hold.
MAX_ROWS = 2000

_SET_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,31}$"}
_SHA = {"type": "string", "pattern": "^[0-9a-f]{7,64}$"}
_NUM = {"type": ["number", "null"]}
_COUNT = {"type": "integer", "minimum": 0, "maximum": 1_000_000_000}
_SCALAR = {"type": ["string", "number", "boolean", "null"], "maxLength": 300}


def _text(limit: int, *, null: bool = False) -> dict[str, Any]:
    return {"type": ["string", "null"] if null else "string", "maxLength": limit}


def _scalars(limit: int = 64) -> dict[str, Any]:
    """An object of at most ``limit`` keys whose values are short scalars."""
    return {
        "type": "object",
        "maxProperties": limit,
        "propertyNames": {"maxLength": 100},
        "additionalProperties": _SCALAR,
    }


_GROWTH = {
    "type": "array",
    "maxItems": 20,
    "items": {
        "type": "array",
        "minItems": 3,
        "maxItems": 3,
        "prefixItems": [_text(300), {"type": "number"}, {"type": "number"}],
    },
}
_CAUSES = {
    "type": "object",
    "required": ["total", "native", "python"],
    "additionalProperties": False,
    "properties": {
        "total": {"type": "number"},
        "native": _GROWTH,
        "python": _GROWTH,
        "bytecode": _GROWTH,
        "priced": _GROWTH,
    },
}
_WORK = {
    "type": "object",
    "maxProperties": 8,
    "propertyNames": {"pattern": "^[a-z][a-z_]{0,31}$"},
    "additionalProperties": {"type": "number", "minimum": 0},
}

_COUNT_TIER = {
    "type": "object",
    "maxProperties": 16,
    "properties": {
        "unavailable": _text(500, null=True),
        "warnings": {"type": "array", "maxItems": 20, "items": _text(500)},
        "verdicts": {
            "type": "object",
            "maxProperties": 16,
            "propertyNames": {"pattern": "^[a-z][a-z-]{0,31}$"},
            "additionalProperties": _COUNT,
        },
        "counted": _COUNT,
        "not_counted": _COUNT,
        "wall_s": {"type": "number", "minimum": 0},
        "gates": _text(300, null=True),
        "timed_once": {"type": "boolean"},
        "counted_duets": {"type": "integer", "minimum": 0, "maximum": 100},
        "recounted": {"type": "array", "maxItems": MAX_ROWS, "items": _text(1000)},
    },
    "additionalProperties": False,
}

_ROW = {
    "type": "object",
    "required": ["fullname", "name", "verdict"],
    "maxProperties": 80,
    "propertyNames": {"maxLength": 64},
    "properties": {
        "fullname": _text(1000),
        "name": _text(500),
        "verdict": {"enum": [v.value for v in Verdict]},
        "group": _text(200, null=True),
        "impl": _text(100, null=True),
        "params": {"anyOf": [{"type": "null"}, _scalars(32)]},
        **{
            k: _NUM
            for k in (
                "head_mean",
                "head_median",
                "head_max",
                "head_ops",
                "base_mean",
                "base_median",
                "base_max",
                "base_ops",
                "change_pct",
                "median_change_pct",
                "ci_low_pct",
                "ci_high_pct",
                "p_value",
                "q_value",
                "noise_pct",
                "mdc_pct",
                "run_noise_pct",
                "items_per_call",
                "confirm_change_pct",
            )
        },  # fmt: skip
        **{k: _COUNT for k in ("head_rounds", "base_rounds", "head_runs", "base_runs")},
        "method": {"type": "string", "pattern": "^[a-z][a-z-]{0,31}$"},
        "higher_is_better": {"type": "boolean"},
        "unit": _text(40),
        "note": _text(500),
        "confirmed": {"type": ["boolean", "null"]},
        # the count tier (rlpace.bench.counts.tier.apply_count_tier)
        "count_verdict": {"type": ["string", "null"], "pattern": "^[a-z][a-z-]{0,31}$"},
        **{
            k: _NUM
            for k in (
                "count_change_pct",
                "cycles_change_pct",
                "count_gate_pct",
                "count_detect_pct",
            )
        },
        "count_note": _text(500, null=True),
        "count_causes": {"anyOf": [{"type": "null"}, _CAUSES]},
        # the work counts (rlpace.bench.work_counts.join.apply_work_counts)
        "work_verdict": {"type": ["string", "null"], "pattern": "^[a-z][a-z-]{0,31}$"},
        "work_base": {"anyOf": [{"type": "null"}, _WORK]},
        "work_head": {"anyOf": [{"type": "null"}, _WORK]},
        "work_names": {"anyOf": [{"type": "null"}, _GROWTH]},
        "work_moved": {
            "type": "array",
            "maxItems": 8,
            "items": {"type": "string", "pattern": "^[a-z][a-z_]{0,31}$"},
        },
        "work_note": _text(500, null=True),
        "time_verdict": {"enum": [*(v.value for v in Verdict), None]},
    },
    "additionalProperties": _SCALAR,
}

_RUN_META = {
    "type": "object",
    "maxProperties": 32,
    "properties": {
        "environment": _scalars(32),
        "sources": {"type": "array", "maxItems": 64, "items": _text(300)},
    },
    "additionalProperties": _SCALAR,
}

_CALIBRATION = {
    "type": "object",
    "required": ["source", "pool"],
    "maxProperties": 64,
    "properties": {
        "source": _text(200),
        "created": {"type": ["string", "null"], "pattern": "^[0-9T:.+ -]{0,40}$"},
        "pool": _COUNT,
        **{
            k: _COUNT
            for k in (
                "held_out_alarms",
                "held_out_runs",
                "detection_hits",
                "detection_trials",
                "detection_benchmarks",
                "confirm",
            )
        },  # fmt: skip
        "held_out_alarms_first": {"type": ["integer", "null"], "minimum": 0},
        "run_confirm": {"type": ["integer", "null"], "minimum": 0},
        "false_alarm_bound": _NUM,
        "injected_pct": _NUM,
        "detection_power": {"type": "number"},
        "mismatch": {
            "type": "object",
            "maxProperties": 32,
            "propertyNames": {"maxLength": 100},
            "additionalProperties": {
                "type": "array",
                "minItems": 2,
                "maxItems": 2,
                "items": _SCALAR,
            },
        },
    },
    "dependentRequired": {
        "held_out_runs": ["held_out_alarms"],
        "injected_pct": [
            "detection_power",
            "detection_hits",
            "detection_trials",
            "detection_benchmarks",
        ],
    },  # fmt: skip
    "additionalProperties": _SCALAR,
}

_NOISE_FLOOR = {
    "type": "object",
    "required": ["controls"],
    "properties": {
        "impl": _text(100),
        "controls": _COUNT,
        "min_controls": _COUNT,
        "z": {"type": "number", "minimum": 0, "maximum": 100},
        "location_pct": _NUM,
        "spread_pct": _NUM,
    },
    "additionalProperties": _SCALAR,
}

_DUET_CALIBRATION = {
    "type": "object",
    "required": ["source", "pairs"],
    "properties": {
        "source": _text(500),
        "pairs": _COUNT,
        "created": _text(40),
        "held_out_alarms": _COUNT,
        "held_out_alarms_first": _COUNT,
        "held_out_runs": _COUNT,
        "held_out_by": {"enum": ["split", "run"]},
        "threshold": {"type": "number", "minimum": 0, "maximum": 10_000},
        "mismatch": {
            "type": "object",
            "maxProperties": 16,
            "additionalProperties": {"type": "array", "maxItems": 2, "items": _SCALAR},
        },
    },
    "additionalProperties": False,
}

_PAIR_SPREAD = {
    "type": "object",
    "required": ["benchmarks", "ratio", "disowned"],
    "properties": {"benchmarks": _COUNT, "ratio": _NUM, "disowned": _COUNT, "stretch": _NUM},
    "additionalProperties": False,
}

_TIME_BUDGET = {
    "type": "object",
    "required": ["budget_min", "planned_duets", "ran_duets", "short"],
    "properties": {
        "budget_min": {"type": "number", "exclusiveMinimum": 0, "maximum": 100_000},
        "planned_duets": _COUNT,
        "ran_duets": _COUNT,
        "short": _COUNT,
    },
    "additionalProperties": False,
}

_PIPELINE = {
    "type": "object",
    "required": ["set"],
    "properties": {"set": _SET_NAME, "base_commit": {"anyOf": [{"type": "null"}, _SHA]}},
}

#: What a ``<set>.json`` of a compared set must look like (JSON Schema 2020-12).
COMPARISON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["format", "version", "rows", "pipeline"],
    "properties": {
        "format": {"const": "rlpace-comparison"},
        "version": {"const": COMPARISON_FORMAT_VERSION},
        "threshold": {"type": "number", "minimum": 0, "maximum": 10_000},
        "paired_threshold": {"type": ["number", "null"], "minimum": 0, "maximum": 10_000},
        "count_threshold": {"type": ["number", "null"], "minimum": 0, "maximum": 10_000},
        "alpha": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "has_base": {"type": "boolean"},
        "head": _RUN_META,
        "base": _RUN_META,
        "noise_floor": {"anyOf": [{"type": "null"}, _NOISE_FLOOR]},
        "calibration": {"anyOf": [{"type": "null"}, _CALIBRATION]},
        "variance_prior": {
            "anyOf": [
                {"type": "null"},
                # (variance, degrees of freedom); infinite degrees of freedom (variances
                # no more spread than sampling explains) are written as null
                {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "prefixItems": [{"type": "number"}, _NUM],
                },
            ]
        },
        "prior_stretch": {
            "anyOf": [
                {"type": "null"},
                # (stretch >= 1, degrees of freedom), infinite ones written as null
                {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "prefixItems": [{"type": "number", "minimum": 1}, _NUM],
                },
            ]
        },
        "confirm_repeats": {"type": "integer", "minimum": 0, "maximum": 1000},
        "paired": {"type": "integer", "minimum": 0, "maximum": 1000},
        "duet_calibration": {"anyOf": [{"type": "null"}, _DUET_CALIBRATION]},
        "calibration_changes": {"type": "array", "maxItems": 16, "items": _text(300)},
        "count_tier": {"anyOf": [{"type": "null"}, _COUNT_TIER]},
        "pair_spread": {"anyOf": [{"type": "null"}, _PAIR_SPREAD]},
        "time_budget": {"anyOf": [{"type": "null"}, _TIME_BUDGET]},
        "rows": {"type": "array", "maxItems": MAX_ROWS, "items": _ROW},
        "pipeline": _PIPELINE,
    },
}

#: What a ``<set>.json`` of a skipped set (no CUDA device, say) must look like.
SKIPPED_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["format", "version", "skipped", "pipeline"],
    "properties": {
        "format": {"const": "rlpace-pr-skipped"},
        "version": {"const": 1},
        "skipped": _text(500),
        "pipeline": _PIPELINE,
    },
}


@dataclass(frozen=True)
class ComparisonRecord:
    """A validated ``<set>.json``: the set, its comparison or why it was skipped.

    Attributes:
        set_name: the benchmark set (``pipeline.set``).
        comparison: the rebuilt comparison; None for a skipped set.
        skipped: why the set did not run (empty when it did).
        base_commit: the base revision's commit as the record states it, or ``""``.

    Example:
        >>> ComparisonRecord("gpu", None, "no CUDA device").skipped
        'no CUDA device'
    """

    set_name: str
    comparison: Comparison | None
    skipped: str = ""
    base_commit: str = ""


def load_record(path: Path, *, max_bytes: int = MAX_RECORD_BYTES) -> ComparisonRecord:
    """Read, size-check, parse and validate one ``<set>.json`` from an artifact.

    Raises:
        BenchInputError: a link, a missing or oversized file, bytes that are not
            UTF-8 JSON, or content that does not match the schema.

    Example:
        >>> load_record(Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: expected a comparison JSON file, found nothing there. Fix: download the bench-report artifact again
    """
    path = Path(path)
    if path.is_symlink():
        raise BenchInputError(
            f"{path}: expected a plain file, found a symbolic link; an artifact's link "
            "could point anywhere on the runner. Fix: upload the report itself"
        )
    if not path.is_file():
        raise BenchInputError(
            f"{path}: expected a comparison JSON file, found nothing there. Fix: download "
            "the bench-report artifact again"
        )
    size = path.stat().st_size
    if size > max_bytes:
        raise BenchInputError(
            f"{path}: {size} bytes, expected at most {max_bytes}; refusing an oversized "
            "comparison. Fix: compare fewer benchmarks per set"
        )
    with path.open("rb") as handle:
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise BenchInputError(f"{path}: grew past {max_bytes} bytes while read; refusing it")
    return record_from_dict(_parse(raw, str(path)), source=str(path))


def record_from_dict(data: Any, *, source: str = "<record>") -> ComparisonRecord:
    """Validate a parsed ``<set>.json`` and rebuild what it describes.

    Raises:
        BenchInputError: the data does not match :data:`COMPARISON_SCHEMA` (or
            :data:`SKIPPED_SCHEMA` for a skipped set).

    Example:
        >>> record_from_dict({"format": "rlpace-comparison"}, source="cpu.json")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: cpu.json: (top level) does not match the comparison schema: expected the key 'version'. Fix: let `rlpace-bench pr` of the default branch write it
    """
    skipped = isinstance(data, Mapping) and data.get("format") == "rlpace-pr-skipped"
    _validate(data, SKIPPED_SCHEMA if skipped else COMPARISON_SCHEMA, source)
    set_name = data["pipeline"]["set"]
    base_commit = data["pipeline"].get("base_commit") or ""
    if skipped:
        return ComparisonRecord(set_name, None, data["skipped"], base_commit)
    return ComparisonRecord(set_name, _comparison(data), "", base_commit)


# ----------------------------------------------------------------------------- parsing


def _parse(raw: bytes, source: str) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchInputError(
            f"{source}: expected UTF-8 JSON, found a byte that is not UTF-8 at offset "
            f"{exc.start}. Fix: let `rlpace-bench pr` write the file"
        ) from None

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key {key[:40]!r}")
            out[key] = value
        return out

    try:
        return json.loads(text, parse_constant=no_constant, object_pairs_hook=unique)
    except RecursionError:
        raise BenchInputError(
            f"{source}: expected a comparison JSON, found nesting too deep to read"
        ) from None
    except ValueError as exc:
        reason = str(exc).splitlines()[0][:120]
        raise BenchInputError(
            f"{source}: expected strict JSON (no NaN, no duplicate keys), got: {reason}. "
            "Fix: let `rlpace-bench pr` write the file"
        ) from None


def _validate(data: Any, schema: dict[str, Any], source: str) -> None:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - the comment job installs it
        raise BenchInputError(
            "reading a comparison artifact needs jsonschema; found it missing. Fix: pip "
            "install -r ci/requirements-comment.txt --require-hashes"
        ) from None
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return
    where = _json_path(error.absolute_path)
    kind = "skipped-set" if schema is SKIPPED_SCHEMA else "comparison"
    raise BenchInputError(
        f"{source}: {where} does not match the {kind} schema: expected {_expected(error)}. "
        "Fix: let `rlpace-bench pr` of the default branch write it"
    )


def _json_path(parts: Any) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{str(part)[:40]!r}" if not str(part).isidentifier() else f".{part}"
    return out.lstrip(".") or "(top level)"


def _expected(error: Any) -> str:
    """What the schema wanted, in words built from the schema only (never the value)."""
    kind, want = error.validator, error.validator_value
    if kind == "required":
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        missing = [k for k in want if k not in instance]
        return f"the key {missing[0]!r}" if missing else "its required keys"
    if kind == "dependentRequired":
        return "the keys the fields present depend on"
    if kind in ("maxLength", "maxItems", "maxProperties"):
        unit = {"maxLength": "characters", "maxItems": "items", "maxProperties": "keys"}[kind]
        return f"at most {want} {unit}"
    if kind in ("minItems",):
        return f"at least {want} items"
    if kind == "type":
        return f"a value of type {want if isinstance(want, str) else ' or '.join(want)}"
    if kind == "const":
        return f"{want!r}"
    if kind == "enum":
        return "one of " + ", ".join(map(str, want))
    if kind == "pattern":
        return f"text matching {want}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        sign = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
        return f"a number {sign[kind]} {want}"
    if kind == "propertyNames":
        return "shorter key names"
    return f"what the schema's {kind!r} rule allows"


# ---------------------------------------------------------------------- the inverse


def _nan(value: Any) -> Any:
    return math.nan if value is None else value


def _rebuilt(cls: type, data: Mapping[str, Any], special: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for dataclass ``cls`` from ``data``: ``None`` back to NaN for
    float fields, ``special`` for the fields that need converting, unknown keys dropped."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in special:
            out[f.name] = special[f.name]
        elif f.name in data:
            value = data[f.name]
            if value is None and isinstance(f.default, float):
                value = math.nan
            out[f.name] = value
        elif f.default is MISSING and f.default_factory is MISSING:  # pragma: no cover
            raise BenchInputError(f"record: the field {f.name!r} is missing")
    return out


def _comparison(data: Mapping[str, Any]) -> Comparison:
    rows = []
    for row in data["rows"]:
        special = {"verdict": Verdict(row["verdict"])}
        if row.get("params") is not None:
            special["params"] = dict(row["params"])
        if row.get("work_moved") is not None:
            special["work_moved"] = tuple(row["work_moved"])
        if row.get("work_names") is not None:
            special["work_names"] = tuple(tuple(item) for item in row["work_names"])
        rows.append(BenchmarkChange(**_rebuilt(BenchmarkChange, row, special)))
    floor = data.get("noise_floor")
    prior = data.get("variance_prior")
    stretch = data.get("prior_stretch")
    special: dict[str, Any] = {
        "rows": tuple(rows),
        "head": dict(data.get("head") or {}),
        "base": dict(data.get("base") or {}),
        "noise_floor": None
        if floor is None
        else NoiseFloor(
            **{
                k: _nan(floor[k])
                for k in ("controls", "location_pct", "spread_pct", "z", "min_controls", "impl")
                if k in floor
            }
        ),
        "calibration": None if data.get("calibration") is None else dict(data["calibration"]),
        "variance_prior": None
        if prior is None
        else (float(prior[0]), math.inf if prior[1] is None else float(prior[1])),
        "prior_stretch": None
        if stretch is None
        else (float(stretch[0]), math.inf if stretch[1] is None else float(stretch[1])),
        "count_tier": None if data.get("count_tier") is None else dict(data["count_tier"]),
        "duet_calibration": None
        if data.get("duet_calibration") is None
        else dict(data["duet_calibration"]),
        "calibration_changes": tuple(str(p) for p in data.get("calibration_changes") or ()),
        "pair_spread": None if data.get("pair_spread") is None else dict(data["pair_spread"]),
        "time_budget": None if data.get("time_budget") is None else dict(data["time_budget"]),
    }
    return Comparison(**_rebuilt(Comparison, data, special))
