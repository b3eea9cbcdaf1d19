"""Fixtures of the lab tests (marked ``lab``): a running simulator and the companions' environment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.lab_harness import SETUP_COMMAND, Lab, missing_parts, running_lab


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The lab, shared by the session; a lab that was not built fails the test (never skips)."""
    missing = missing_parts()
    if missing:
        pytest.fail(
            f"The lab is not built (missing: {', '.join(missing)}). Run `{SETUP_COMMAND}` "
            "(CI does it through scripts/test.sh), then run the tests again.",
            pytrace=False,
        )
    with running_lab(tmp_path_factory.mktemp("lab")) as running:
        yield running
