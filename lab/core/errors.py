"""The one exception type the core raises for bad input."""

__all__ = ["LabError", "LabErrors", "Mistakes", "WHOLE_INSTANCES", "WEIGHTS_DO_NOT_FIT"]

# Reasons a refusal may carry (LabError.reason), for callers that say it in other words
# (lab/ui/words/refusal.py) without reading the message's text.
WHOLE_INSTANCES = "whole_instances"  # facts: gpus, tp_field, tp
WEIGHTS_DO_NOT_FIT = "weights_do_not_fit"  # facts: llm, weights_gb, tp, gpu, usable_gb


class LabError(ValueError):
    """Bad input: the message names the field path, the bad value and what is allowed.

    `path` is the dotted/indexed field path (e.g. ``fleet.gpus`` or
    ``stars[1].value``), or "" when the problem is not tied to one field.
    `reason` names the kind of refusal where a caller may want to say it its own way (one of
    the constants above; None for the rest), and `facts` holds the values its message is
    written from, by name. The message stays the one thing a person reads.
    """

    def __init__(self, path, message, reason=None, facts=None):
        self.path = path
        self.detail = message
        self.reason = reason
        self.facts = dict(facts or {})
        super().__init__(f"{path}: {message}" if path else message)

    def __reduce__(self):
        # Rebuilt from every argument, so an error raised in a worker process (lab/parallel.py)
        # reaches the command line (and its reason the page) whole.
        return (type(self), (self.path, self.detail, self.reason, self.facts))


class LabErrors(LabError):
    """Several mistakes in one input, each a LabError (`errors`, in the input's order): what
    `lab check` reports of a mission file in one run. Its path and detail are the first's,
    so a caller that shows one mistake shows that; its message lists them all, one a line."""

    def __init__(self, errors):
        self.errors = list(errors)
        first = self.errors[0]
        LabError.__init__(self, first.path, first.detail, first.reason, first.facts)
        self.args = (f"{len(self.errors)} mistakes:\n" + "\n".join(f"  {err}" for err in self.errors),)

    def __reduce__(self):
        return (type(self), (self.errors,))


class Mistakes:
    """Collects the LabErrors of checks that do not depend on one another, so one run names them
    all (at most `limit`, when given; more are counted in a last line: give the limit to the
    outermost collector only, since an inner one's errors are added to it one by one).

        mistakes = Mistakes()
        title = mistakes.check(lambda: read_title(data))   # None when it raised
        ...
        mistakes.raise_any()                               # LabError (one) or LabErrors (several)
    """

    def __init__(self, limit=None):
        self.errors, self.limit, self.more = [], limit, 0

    def check(self, read, default=None):
        try:
            return read()
        except LabErrors as exc:
            for err in exc.errors:
                self.add(err)
        except LabError as exc:
            self.add(exc)
        return default

    def add(self, error):
        if self.limit is None or len(self.errors) < self.limit:
            self.errors.append(error)
        else:
            self.more += 1

    def raise_any(self):
        if self.more:
            self.errors.append(LabError("", f"and {self.more} more (the first {self.limit} are above)"))
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise LabErrors(self.errors)
