"""Where a run's slow, pure work runs (a worker process under `lab serve`, at once in the browser), what that work is, and the whole-run views it builds."""
