"""Reading files into specs: bounded reads, and errors that name the file, line and column."""

import json
import os
import stat

from . import fields as F
from .errors import LabError
from .spec import Scenario

__all__ = ["MAX_JSON_BYTES", "read_bytes", "read_text", "read_json", "parse_json", "load_scenario"]

# A scenario or mission file is a few kilobytes; this only stops a runaway read
# (a device such as /dev/zero, or the wrong file).
MAX_JSON_BYTES = 16 * 1024 * 1024


def read_bytes(path, field, limit, regular_only=False, what="file"):
    """At most `limit` bytes of the file at `path`, else LabError(field, ...).

    `regular_only` refuses devices, FIFOs and folders before opening them (opening a
    FIFO would block). Either way the read is bounded, so /dev/zero cannot fill memory.
    """
    named = what if field == str(path) else f"{what} {F.describe(str(path))}"
    try:
        if regular_only and not stat.S_ISREG(os.stat(path).st_mode):
            raise LabError(field, f"{named} is not a regular file")
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise LabError(field, f"cannot read {named}: {exc.strerror or exc}") from None
    except ValueError:  # the OS refuses a path with a NUL character
        raise LabError(F.describe(field) if "\0" in field else field, f"{named} is not a usable file path (it contains a NUL character)") from None
    if len(data) > limit:
        raise LabError(field, f"{named} is larger than the limit of {limit // (1024 * 1024):,} MB")
    return data


def read_text(path, field, limit, regular_only=False, what="file"):
    """The file's text, decoded as UTF-8 (a leading byte-order mark is dropped)."""
    data = read_bytes(path, field, limit, regular_only, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        named = what if field == str(path) else f"{what} {F.describe(str(path))}"
        raise LabError(field, f"{named} is not UTF-8 text (byte {exc.start:,} cannot be decoded)") from None


def read_json(path):
    text = read_text(path, str(path), MAX_JSON_BYTES)
    return parse_json(text, os.path.basename(str(path)))


def parse_json(text, name="input"):
    """JSON text -> value. Over-long numbers come back as fields.BigNumber, for the readers to reject."""
    try:
        return F.loads(text)
    except json.JSONDecodeError as exc:
        raise LabError(f"{name}: line {exc.lineno}, column {exc.colno}", f"malformed JSON: {exc.msg}") from None
    except RecursionError:
        raise LabError(name, "the JSON is nested too deeply to read (no scenario or mission needs more than a few levels)") from None


def load_scenario(source, overrides=(), base_dir=None):
    """A Scenario from a dict, a bare scenario file, or a mission file (its `scenario`).

    `overrides` are "dotted.path=value" strings applied before validation. A trace
    path is relative to the file's folder (a dict: to `base_dir`, else the working
    directory). A mission's trace must lie inside the mission's folder; a bare
    scenario's inside its folder or the working directory (see workload.resolve_trace_path).
    """
    from .spec import apply_overrides

    path = ""
    if isinstance(source, Scenario):
        if not overrides:
            return source
        source = source.to_dict()
    if isinstance(source, (str, os.PathLike)):
        path = str(source)
        data = read_json(path)
        base_dir = os.path.dirname(os.path.abspath(path)) if base_dir is None else base_dir
    else:
        data = source
    prefix = ""
    base_dir = base_dir or ""
    roots = (base_dir, "")  # "" is the working directory
    if isinstance(data, dict) and "scenario" in data and "workload" not in data:
        data = data["scenario"]  # a mission file
        prefix = "scenario"
        roots = (base_dir,)
    if overrides:
        if not isinstance(data, dict):
            raise LabError(prefix, f"expected a scenario object to apply --set to, got {F.describe(data)}")
        data = apply_overrides(data, overrides)
    return Scenario.from_dict(data, prefix, base_dir, roots)
