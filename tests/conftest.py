"""Settings for the whole suite.

pytest-xdist runs one test process per core, and by default the line core starts a worker per
core in each of them (and polars a thread per core): as many threads per process as the
machine has cores. The suite runs the core on one worker (LOGCORR_THREADS=1, unless set
already: `LOGCORR_THREADS=2 pytest` runs all of it threaded); tests of the threaded path pass
`threads=2` to `analyze`, or LOGCORR_THREADS=2 to a command they run (test_chunking.py,
test_robust_determinism.py, test_robust_interrupt.py, test_cli_errors.py).
"""

from __future__ import annotations

import os

os.environ.setdefault("LOGCORR_THREADS", "1")
