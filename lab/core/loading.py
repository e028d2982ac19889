"""Reading JSON files into specs, with errors that point at the line and column."""

import json
import os

from .errors import LabError
from .spec import Scenario

__all__ = ["read_json", "load_scenario"]


def read_json(path):
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise LabError(str(path), f"cannot read file: {exc.strerror or exc}") from None
    return parse_json(text, os.path.basename(str(path)))


def parse_json(text, name="input"):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabError(f"{name}: line {exc.lineno}, column {exc.colno}", f"malformed JSON: {exc.msg}") from None


def load_scenario(source, overrides=(), base_dir=None):
    """A Scenario from a dict, a bare scenario file, or a mission file (its `scenario`).

    `overrides` are "dotted.path=value" strings applied before validation.
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
    if isinstance(data, dict) and "scenario" in data and "workload" not in data:
        data = data["scenario"]  # a mission file
        prefix = "scenario"
    if overrides:
        data = apply_overrides(data, overrides)
    return Scenario.from_dict(data, prefix, base_dir or "")
