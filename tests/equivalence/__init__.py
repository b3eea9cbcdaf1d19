"""Differential tests: the rule lists against frozen copies of the hand-written code they replaced.

``frozen_*.py`` are verbatim copies of ``safety/review.py``, ``safety/blast.py``,
``dispatch/judge.py`` and ``templates/steps.py`` as they were before the rules became lists
(commit 574335e); they are kept only as the oracle of these tests. ``EXAMPLES`` is a per-test
setting (never a global profile, which would change the fuzz tests' profile too): seeded in the
suite (80 examples per test, to keep the fast tier fast); ``HYPOTHESIS_PROFILE=long`` runs 5,000,
unseeded, to explore new examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
EXAMPLES = settings(
    max_examples=5000 if _LONG else 80,
    deadline=None,
    derandomize=not _LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
