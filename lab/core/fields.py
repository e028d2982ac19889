"""Small readers that pull typed, range-checked values out of JSON-like dicts.

Every reader takes the dict, the key and the dotted path of the dict, and raises
`LabError` naming the full field path, the bad value and what would be valid.
"""

import difflib
import math

from .errors import LabError

__all__ = [
    "MISSING",
    "join",
    "check_keys",
    "read_number",
    "read_int",
    "read_bool",
    "read_choice",
    "read_str",
    "read_dict",
    "read_list",
    "describe",
    "number",
]


class _Missing:
    def __repr__(self):
        return "MISSING"


MISSING = _Missing()


def join(path, key):
    """`join("fleet", "gpus")` -> "fleet.gpus"; `join("stars", 1)` -> "stars[1]"."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def describe(value):
    """A short, JSON-flavoured rendering of a bad value for error messages."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return repr(text)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def check_keys(data, path, allowed):
    """Reject keys an author probably mistyped, suggesting the allowed ones."""
    if not isinstance(data, dict):
        raise LabError(path, f"expected an object, got {describe(data)}")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise LabError(
            join(path, key),
            f"unknown field; {hint}allowed fields here: {', '.join(sorted(allowed))}",
        )


def _get(data, key, path, default):
    if key in data and data[key] is not None:
        return data[key]
    if default is MISSING:
        raise LabError(join(path, key), "required field is missing")
    return default


def read_number(data, key, path, default=MISSING, lo=None, hi=None, lo_open=False):
    value = _get(data, key, path, default)
    if value is default and default is not MISSING:
        return value
    where = join(path, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LabError(where, f"expected a number, got {describe(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise LabError(where, f"expected a finite number, got {describe(value)}")
    _check_range(where, value, lo, hi, lo_open)
    return value


def read_int(data, key, path, default=MISSING, lo=None, hi=None):
    value = _get(data, key, path, default)
    if value is default and default is not MISSING:
        return value
    where = join(path, key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise LabError(where, f"expected a whole number, got {describe(value)}")
    _check_range(where, value, lo, hi, False)
    return value


def number(value):
    """A number as a person writes it: 2,000,000 rather than 2e+06; 0.05 stays 0.05."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:g}"


def _check_range(where, value, lo, hi, lo_open):
    if lo is not None and (value < lo or (lo_open and value == lo)):
        bound = f"greater than {number(lo)}" if lo_open else f"at least {number(lo)}"
        if hi is not None:
            bound += f" and at most {number(hi)}"
        raise LabError(where, f"{number(value)} is out of range: must be {bound}")
    if hi is not None and value > hi:
        bound = f"at most {number(hi)}"
        if lo is not None:
            bound = ("greater than" if lo_open else "at least") + f" {number(lo)} and {bound}"
        raise LabError(where, f"{number(value)} is out of range: must be {bound}")


def read_bool(data, key, path, default=MISSING):
    value = _get(data, key, path, default)
    if not isinstance(value, bool):
        raise LabError(join(path, key), f"expected true or false, got {describe(value)}")
    return value


def read_choice(data, key, path, choices, default=MISSING):
    value = _get(data, key, path, default)
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise LabError(join(path, key), f"{describe(value)} is not one of {options}")
    return value


def read_str(data, key, path, default=MISSING, allow_empty=False):
    value = _get(data, key, path, default)
    if not isinstance(value, str):
        raise LabError(join(path, key), f"expected text, got {describe(value)}")
    if not allow_empty and not value.strip():
        raise LabError(join(path, key), "must not be empty")
    return value


def read_dict(data, key, path, default=MISSING):
    value = _get(data, key, path, default)
    if not isinstance(value, dict):
        raise LabError(join(path, key), f"expected an object, got {describe(value)}")
    return value


def read_list(data, key, path, default=MISSING):
    value = _get(data, key, path, default)
    if not isinstance(value, list):
        raise LabError(join(path, key), f"expected a list, got {describe(value)}")
    return value
