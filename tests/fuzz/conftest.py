"""Hypothesis profiles for the fuzz tests, chosen with ``HYPOTHESIS_PROFILE``.

``ci`` (the default) runs a bounded number of examples so the whole fuzz set stays well under a
minute; ``long`` is what ``scripts/fuzz.sh`` runs. No deadline: a slow example is not a failure
here, only a wrong or missing answer is.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,  # one server per test, shared by its examples on purpose
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
    "print_blob": True,
}
settings.register_profile("ci", max_examples=25, database=None, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=1500, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
