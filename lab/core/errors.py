"""The one exception type the core raises for bad input."""

__all__ = ["LabError"]


class LabError(ValueError):
    """Bad input: the message names the field path, the bad value and what is allowed.

    `path` is the dotted/indexed field path (e.g. ``fleet.gpus`` or
    ``stars[1].value``), or "" when the problem is not tied to one field.
    """

    def __init__(self, path, message):
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}" if path else message)

    def __reduce__(self):
        # Rebuilt from both arguments, so an error raised in a worker process (lab/parallel.py)
        # reaches the command line whole.
        return (type(self), (self.path, self.detail))
