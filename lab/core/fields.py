"""Small readers that pull typed, range-checked values out of JSON-like dicts.

Every reader takes the dict, the key and the dotted path of the dict, and raises
`LabError` naming the full field path, the bad value and what would be valid.
"""

import difflib
import json
import math
import re

from .errors import LabError

__all__ = [
    "MISSING",
    "BigNumber",
    "is_number",
    "loads",
    "JSON_NUMBER_HOOKS",
    "number_from_text",
    "join",
    "check_keys",
    "read_number",
    "read_int",
    "read_bool",
    "read_choice",
    "read_str",
    "read_dict",
    "read_list",
    "read_lines",
    "describe",
    "number",
]


class _Missing:
    def __repr__(self):
        return "MISSING"


MISSING = _Missing()

# JSON integer literals longer than this are kept as text (BigNumber): no field takes
# such a value, and Python refuses to convert ints of over 4,300 digits at all.
MAX_NUMBER_LITERAL = 100


class BigNumber:
    """A number too large to hold (400 digits, 1e999), kept as its JSON text.

    `loads` produces it so that the field readers, not the JSON parser, reject the
    value, naming the field and its valid range.
    """

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return f"BigNumber({_shorten(self.text)!r})"

    @property
    def negative(self):
        return self.text.startswith("-")


def _json_int(text):
    return BigNumber(text) if len(text) > MAX_NUMBER_LITERAL else int(text)


def _json_float(text):
    value = float(text)
    return value if math.isfinite(value) else BigNumber(text)


# For any json decoder that must read numbers the way `loads` does.
JSON_NUMBER_HOOKS = {"parse_int": _json_int, "parse_float": _json_float}


def loads(text):
    """`json.loads` that keeps over-long numbers as BigNumber instead of failing or overflowing.

    Raises json.JSONDecodeError for malformed text and RecursionError for nesting
    deeper than Python's recursion limit; callers turn both into LabError.
    """
    return json.loads(text, **JSON_NUMBER_HOOKS)


# A number as JSON writes one, a sign allowed in front (no "1_000", no other digits than 0-9).
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def number_from_text(text):
    """A number typed as text (a command-line flag) as `loads` reads one: an int, a float, or a
    BigNumber past a float's range; "nan" and "inf" as floats, for the readers to refuse by
    name; None when the text is no number."""
    raw = str(text).strip()
    if raw.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return float(raw)
    if not _NUMBER_TEXT.fullmatch(raw):
        return None
    if _INT_TEXT.fullmatch(raw):
        return _json_int(raw.lstrip("+"))
    return _json_float(raw)


def is_number(value):
    """A JSON number: int, float or BigNumber, never a boolean."""
    return isinstance(value, (int, float, BigNumber)) and not isinstance(value, bool)


def _shorten(text, size=16):
    # (8 leading characters at most: a number from a file is quoted, never a long run of its digits)
    return text if len(text) <= size else f"{text[:size - 8]}...{text[-5:]}"


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
    if isinstance(value, BigNumber):
        short = _shorten(value.text)
        return short if short == value.text else f"{short} (a {len(value.text):,}-character number)"
    if isinstance(value, int) and value.bit_length() > 200:
        # repr() of an int over 4,300 digits raises; say how big it is instead.
        digits = int(value.bit_length() * 0.30103) + 1
        return f"{'-' if value < 0 else ''}a number of about {digits:,} digits"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def check_keys(data, path, allowed):
    """Reject keys an author probably mistyped, suggesting the allowed ones."""
    if not isinstance(data, dict):
        raise LabError(path, f"expected an object, got {describe(data)}")
    unknown = sorted(set(data) - set(allowed), key=str)
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
    if not is_number(value):
        raise LabError(where, f"expected a number, got {describe(value)}")
    _reject_big(where, value, lo, hi, lo_open)
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
    if isinstance(value, BigNumber) or (isinstance(value, int) and not isinstance(value, bool)):
        _reject_big(where, value, lo, hi, False)
    if isinstance(value, bool) or not isinstance(value, int):
        raise LabError(where, f"expected a whole number, got {describe(value)}")
    _check_range(where, value, lo, hi, False)
    return value


# Ints beyond this are "too big" for every field (no limit here is near it) and
# cannot all be converted to float.
_BIG = 10**300


def _reject_big(where, value, lo, hi, lo_open):
    """A BigNumber or an int too large for a float: out of range, with the range named."""
    if isinstance(value, BigNumber):
        negative = value.negative
    elif isinstance(value, int) and abs(value) >= _BIG:
        negative = value < 0
    else:
        return
    bound = _bound_text(lo, hi, lo_open) if (lo, hi) != (None, None) else "a finite number"
    side = "too small" if negative else "too large"
    raise LabError(where, f"{describe(value)} is {side}: must be {bound}")


def number(value):
    """A number as a person writes it: 2,000,000 rather than 2e+06; 0.05 stays 0.05."""
    if isinstance(value, BigNumber) or (isinstance(value, int) and abs(value) >= _BIG):
        return describe(value)
    if abs(value) < 1e15 and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def _bound_text(lo, hi, lo_open):
    parts = []
    if lo is not None:
        parts.append(f"greater than {number(lo)}" if lo_open else f"at least {number(lo)}")
    if hi is not None:
        parts.append(f"at most {number(hi)}")
    return " and ".join(parts)


def _check_range(where, value, lo, hi, lo_open):
    if (lo is not None and (value < lo or (lo_open and value == lo))) or (hi is not None and value > hi):
        raise LabError(where, f"{number(value)} is out of range: must be {_bound_text(lo, hi, lo_open)}")


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


def read_lines(data, key, path, default=MISSING, max_chars=None):
    """Markdown text, or a list of lines (easier to write in JSON) joined with newlines."""
    where = join(path, key)
    raw = data.get(key)
    if raw is None:
        if default is MISSING:
            raise LabError(where, "required field is missing")
        return default
    if isinstance(raw, list):
        for i, line in enumerate(raw):
            if not isinstance(line, str):
                raise LabError(join(where, i), f"expected a line of text, got {describe(line)}")
        raw = "\n".join(raw)
    elif not isinstance(raw, str):
        raise LabError(where, f"expected Markdown text or a list of lines, got {describe(raw)}")
    if not raw.strip():
        raise LabError(where, "must not be empty")
    if max_chars is not None and len(raw) > max_chars:
        raise LabError(where, f"is {len(raw):,} characters ({describe(raw)}); keep it to {max_chars:,}")
    return raw


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
