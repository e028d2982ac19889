"""Rewrite a generated block of a Markdown file: the text between two marker comments.

The docs quote figures only from blocks a script writes (benchmarks/calibration.py,
benchmarks/lessons.py), so a figure is never typed by hand.
"""

import os


def rewrite_block(path, begin, end, body, root=None):
    """Put `body` between the `begin` and `end` markers of `path`; say whether it changed."""
    text = open(path, encoding="utf-8").read()
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not (sep and sep2):
        raise SystemExit(f"{path} has no {begin} ... {end} block")
    new = f"{head}{begin}\n{body}\n{end}{tail}"
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    name = os.path.relpath(path, root) if root else path
    print(f"{name}: {begin[5:-4]}: " + ("rewritten" if new != text else "already current"))
