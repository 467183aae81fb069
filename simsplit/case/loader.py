"""Read a YAML case, apply dotted overrides, validate, fill defaults, check physics limits.

Every problem becomes one :class:`CaseError` whose message names the dotted key, the bad value
and what is allowed, so the CLI can print a single line and exit with code 2.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from simsplit.case.schema import case_schema
from simsplit.errors import CaseError
from simsplit.fluid.validate import check_fluid_case
from simsplit.md.schema import check_md_case


# --- reading ------------------------------------------------------------------------------------
class _CaseLoader(yaml.SafeLoader):
    """YAML 1.1 safe loading, except that ``1e-3`` and ``2E5`` are floats as in YAML 1.2 (and
    every other reader of numbers): plain PyYAML reads them as strings, and a case would then
    be refused for a viscosity written the way everyone writes it."""


_CaseLoader.yaml_implicit_resolvers = {
    k: [r for r in v if r[0] != "tag:yaml.org,2002:float"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_CaseLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                  |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                  |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def _yaml_repr(value: Any) -> str:
    """A choice as a case file writes it: true/false/null, not Python's True/False/None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else repr(value)


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_CaseLoader)  # noqa: S506 - a SafeLoader subclass


def _read_yaml(path: Path) -> Any:
    if not path.exists():
        raise CaseError(f"case file '{path}' not found")
    if path.is_dir():
        raise CaseError(f"case file '{path}' is a directory, expected a YAML file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"case file '{path}' cannot be read: {exc}") from None
    try:
        return _yaml_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CaseError(f"{path}: invalid YAML{where}: {problem}") from None


def parse_override(text: str) -> tuple[str, Any]:
    """``"fluid.reynolds=400"`` -> ``("fluid.reynolds", 400)``; the value is read as YAML."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise CaseError(f"override '{text}': expected KEY=VALUE with a dotted key, "
                        "e.g. fluid.reynolds=400")
    try:
        value = _yaml_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key, value


def apply_overrides(case: dict[str, Any], overrides: Mapping[str, Any] | Iterable[str] | None
                    ) -> dict[str, Any]:
    """Return a copy of ``case`` with dotted overrides applied (a mapping or KEY=VALUE strings)."""
    case = copy.deepcopy(case)
    if not overrides:
        return case
    items = overrides.items() if isinstance(overrides, Mapping) else map(parse_override, overrides)
    for key, value in items:
        node = case
        parts = str(key).split(".")
        for depth, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                where = ".".join(parts[: depth + 1])
                raise CaseError(f"override '{key}': {where} is {nxt!r}, not a section")
            node = nxt
        node[parts[-1]] = value
    return case


# --- validation -------------------------------------------------------------------------------
def _dotted(path: Iterable[Any]) -> str:
    out = ""
    for p in path:
        if isinstance(p, str) and not p.isprintable():  # a key with a newline: quoted, one line
            p = repr(p)
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _schema_at(schema: dict[str, Any], path: Iterable[Any]) -> dict[str, Any]:
    for p in path:
        if isinstance(p, int):
            schema = schema.get("items", {})
        else:
            schema = schema.get("properties", {}).get(p, {})
    return schema


#: what a schema key's own ``x-expected`` text does not say, in words: one value of a type
_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string",
               "boolean": "true or false", "array": "a list", "object": "a section",
               "null": "null"}
_PLURAL_NAMES = {"integer": "integers", "number": "numbers", "string": "strings",
                 "boolean": "booleans"}


def _describe_allowed(schema: dict[str, Any]) -> str:
    """What a value of ``schema`` may be, in words (a key's ``x-expected`` text if it has one)."""
    if "x-expected" in schema:
        return schema["x-expected"]
    if "enum" in schema:
        return "one of " + ", ".join(_yaml_repr(v) for v in schema["enum"])
    types = schema.get("type") or []
    types = types if isinstance(types, list) else [types]
    if "array" in types:
        others = [_TYPE_NAMES.get(t, t) for t in types if t != "array"]
        return ", or ".join([_describe_list(schema), *others])
    parts = [" or ".join(_TYPE_NAMES.get(t, t) for t in types)] if types else []
    parts += [" and ".join(_bounds(schema))] if _bounds(schema) else []
    if "minLength" in schema:
        parts.append("not empty")
    return " ".join(parts) or "a valid value"


def _bounds(schema: dict[str, Any]) -> list[str]:
    return [text.format(schema[key]) for key, text in (
        ("minimum", ">= {}"), ("exclusiveMinimum", "> {}"),
        ("maximum", "<= {}"), ("exclusiveMaximum", "< {}")) if key in schema]


def _describe_list(schema: dict[str, Any]) -> str:
    """``a list of 3 integers (each >= 1)``, ``a list of 2 or 3 numbers``, ..."""
    items = schema.get("items", {})
    low, high = schema.get("minItems"), schema.get("maxItems")
    if low is not None and low == high:
        count = str(low)
    elif low is not None and high is not None:
        count = f"{low} or {high}" if high == low + 1 else f"{low} to {high}"
    elif low is not None:
        count = f"at least {low}"
    elif high is not None:
        count = f"at most {high}"
    else:
        count = ""
    noun = _PLURAL_NAMES.get(items.get("type"), "items")
    if count == "1" or count.endswith(" 1"):
        noun = noun[:-1]
    text = " ".join(filter(None, ("a list of", count, noun)))
    terms = [f"each {' and '.join(_bounds(items))}"] if _bounds(items) else []
    terms += ["no repeats"] if schema.get("uniqueItems") else []
    return f"{text} ({', '.join(terms)})" if terms else text


def _format_error(err: ValidationError, root: dict[str, Any]) -> str:
    path = list(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        key = extra[0]
        where = _dotted(path + [key])
        hint = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint_text = f"did you mean '{hint[0]}'? " if hint else ""
        return f"{where}: unknown key; {hint_text}allowed keys: {', '.join(allowed)}"
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        sub = _schema_at(root, path).get("properties", {}).get(missing, {})
        return (f"{_dotted(path + [missing])}: required key is missing "
                f"(expected {_describe_allowed(sub)})")
    if err.validator in ("minItems", "maxItems") and err.validator_value is not None:
        schema = err.schema
    else:
        schema = _schema_at(root, path)
    return f"{_dotted(path)}: {err.instance!r} is not allowed: expected {_describe_allowed(schema)}"


def _fill_defaults(node: Any, schema: dict[str, Any]) -> None:
    if not isinstance(node, dict):
        return
    for key, sub in schema.get("properties", {}).items():
        if key not in node and "default" in sub:
            node[key] = copy.deepcopy(sub["default"])
        if key in node:
            _fill_defaults(node[key], sub)


def _reject_non_finite(node: Any, path: list[Any]) -> None:
    if isinstance(node, float) and not math.isfinite(node):
        raise CaseError(f"{_dotted(path)}: {node!r} is not allowed: expected a finite number")
    if isinstance(node, dict):
        for k, v in node.items():
            _reject_non_finite(v, path + [k])
    elif isinstance(node, list):
        for k, v in enumerate(node):
            _reject_non_finite(v, path + [k])


def validate_case(case: Any, source: str = "case") -> dict[str, Any]:
    """Check ``case`` against the schema and the physics limits; return it with defaults."""
    try:
        return _validate(case)
    except CaseError as exc:
        raise CaseError(f"{source}: {exc}") from None


def _validate(case: Any) -> dict[str, Any]:
    if not isinstance(case, dict):
        kind = "empty" if case is None else type(case).__name__
        raise CaseError(f"(top level): expected a mapping of sections, got {kind}")
    bad_keys = [k for k in case if not isinstance(k, str)]
    if bad_keys:
        raise CaseError(f"{bad_keys[0]!r}: keys must be strings")
    schema = case_schema()
    err = best_match(Draft202012Validator(schema).iter_errors(case),
                     key=lambda e: (-len(e.absolute_path), e.validator != "additionalProperties"))
    if err is not None:
        raise CaseError(_format_error(err, schema))
    _reject_non_finite(case, [])
    case = copy.deepcopy(case)
    _fill_defaults(case, schema)
    physics = case["physics"]
    if physics not in case:
        raise CaseError(f"{physics}: required section is missing for physics '{physics}'")
    other = {"fluid": "md", "md": "fluid"}[physics]
    if other in case:
        raise CaseError(f"{other}: section does not apply to physics '{physics}'")
    _check_decomposition(case)
    if physics == "fluid":
        _check_physics(check_fluid_case, case)
    else:
        _check_physics(check_md_case, case)
    return case


def _check_decomposition(case: dict[str, Any]) -> None:
    dec = case["decomposition"]
    w = dec.get("weights")
    if w is not None and len(w) != dec["subdomains"]:
        raise CaseError(f"decomposition.weights: {len(w)} weights given, expected one per slab "
                        f"({dec['subdomains']}, from decomposition.subdomains)")


def _check_physics(check: Callable[[dict[str, Any]], None], case: dict[str, Any]) -> None:
    """Run a physics package's own checks of its section; its ValueError becomes a CaseError."""
    try:
        check(case)
    except CaseError:
        raise
    except ValueError as exc:
        raise CaseError(str(exc)) from None


def load_case(path: str | Path, overrides: Mapping[str, Any] | Iterable[str] | None = None
              ) -> dict[str, Any]:
    """Load, override and validate a case file; raise :class:`CaseError` on any problem."""
    path = Path(path)
    raw = _read_yaml(path)
    if overrides and isinstance(raw, dict):
        raw = apply_overrides(raw, overrides)
    _resolve_files(raw, path.parent)
    return validate_case(raw, source=str(path))


def _resolve_files(raw: Any, base: Path) -> None:
    """Files a case names (mask bodies' and the inlet's ``file``) are relative to the case
    file's directory."""
    domain = raw.get("domain") if isinstance(raw, dict) else None
    bodies = domain.get("bodies") if isinstance(domain, dict) else None
    inlet = domain.get("inlet") if isinstance(domain, dict) else None
    for item in [*(bodies if isinstance(bodies, list) else []), inlet]:
        if isinstance(item, dict) and isinstance(item.get("file"), str):
            item["file"] = str(base / Path(item["file"]).expanduser())
