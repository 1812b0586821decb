"""Bounds on the numbers of a scenario (and of the faults planned against one).

Finite, and small enough that a trial ends within the deadline and the engine can store
what it is given. A value beyond them is the scenario's mistake, refused at validation,
not a failure to pin on the engine. A module of its own so that the fault grammar
(harness/faults/spec.py) can bound its times without importing the scenario format.
"""

from __future__ import annotations

MIN_DEADLINE_S = 1.0  # a run needs a few round trips to the model, tools and sink
MAX_DEADLINE_S = 3600.0
MAX_LATENCY_MS = int(MAX_DEADLINE_S * 1000)  # and at most the scenario's own deadline
MAX_TURN_TOKENS = 2**31 - 1  # usage of one model response fits a 32-bit integer column
MAX_SCRIPTED_FAILURES = 1000  # fail_first / effect_then_fail: retries an engine might make
