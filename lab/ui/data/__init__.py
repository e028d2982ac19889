"""A run seen as numbers: the pure numpy views of a run (no Panel, no Bokeh) that the canvas and the
plots draw, each whole-run one built once per run (run_views.py) and, under `lab serve`, in the
worker process that simulated it."""
