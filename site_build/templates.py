"""The templates in static/site/: read one, fill its {{TOKENS}}, and stop on a token missing
or left unfilled."""

import re

from site_build.common import SITE_SRC, BuildError

__all__ = []  # its helpers are for this package only


def _template(name):
    return (SITE_SRC / name).read_text(encoding="utf-8")


def _fill(text, values, name):
    for key, value in values.items():
        token = "{{" + key + "}}"
        if token not in text:
            raise BuildError(f"static/site/{name} has no {token}")
        text = text.replace(token, value)
    left = re.findall(r"\{\{[A-Z_]+\}\}", text)
    if left:
        raise BuildError(f"static/site/{name}: unfilled {sorted(set(left))}")
    return text
