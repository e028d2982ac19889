"""Split the Fleet: an interactive lab for LLM serving fleets.

`lab.core` is the simulation (standard library only, runs in bare Pyodide);
`lab.ui` is the Panel/Bokeh front end; `lab.cli` is `python -m lab`.
"""
