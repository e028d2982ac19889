"""Load a sibling module of tests/ui by file name (tests/ui is not a package, and its
conftest.py shares its name with tests/conftest.py, so a plain import could find the wrong one)."""

import importlib.util
from pathlib import Path

__all__ = ["sibling"]

HERE = Path(__file__).resolve().parent


def sibling(name):
    """tests/ui/NAME.py as a module of its own (a fresh copy each call)."""
    spec = importlib.util.spec_from_file_location(f"_stf_ui_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
