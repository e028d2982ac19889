"""Views of a whole run, computed once per run and, under `lab serve`, where the run was.

A function marked `@per_run` is pure: its first argument is a run (a lab.core Result), the
others a few hashable numbers, and its value depends on nothing else. Its value is kept with
the run (in the Result's `_page_views`, keyed by the function and those numbers), so a
second call is a lookup: the canvas's overview each time the plots show, a kept run shown
again.

Under `lab serve` the worker process that simulated a run also calls them
(run_work.warm_views) before sending it back: the values travel with the run, and the
server's loop, which serves every student at once, only looks them up (benchmarks/README.md
"A classroom on one server" measures what that moves off the loop). Callers must not change
what they are given: the next caller gets the same object.
"""

import functools

__all__ = ["per_run", "KEPT_AS"]

KEPT_AS = "_page_views"  # the Result attribute the values live in (pickled with it)


def per_run(function):
    name = f"{function.__module__}.{function.__qualname__}"

    @functools.wraps(function)
    def kept(result, *args):
        views = result.__dict__.get(KEPT_AS)
        if views is None:
            views = result.__dict__[KEPT_AS] = {}
        key = (name, args)
        if key not in views:
            views[key] = function(result, *args)
        return views[key]

    kept.uncached = function
    return kept
