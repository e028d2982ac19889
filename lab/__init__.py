"""Split the Fleet: an interactive lab for LLM serving fleets.

`lab.core` is the simulation (standard library only, runs in bare Pyodide);
`lab.ui` is the Panel/Bokeh front end; `lab.cli` is `python -m lab`.
"""

import os
import sys

# numpy's OpenBLAS starts a thread per core when numpy is imported, and those threads spin
# for a while: on this two-core machine the import cost 0.09 s of CPU instead of 0.045 s.
# The lab does no linear algebra (sorts, cumulative sums and element-wise passes only), so
# one thread is all it uses. A user's own setting wins; Dask's worker processes inherit it.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
