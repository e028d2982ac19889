"""The one exception type the core raises for bad input."""

__all__ = ["LabError", "WHOLE_INSTANCES", "WEIGHTS_DO_NOT_FIT"]

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
