"""Releases (docs/operations.md#upgrades): CHANGELOG.md, release/previous.json and the version agree,
and this code's schema is still one the previous release can use (expand, then contract). The git
tag itself and a replica of the release running beside this code: tests/transports/test_rolling_upgrade.py."""

from __future__ import annotations

import re

from packaging.version import Version

from tests.support.release import PREVIOUS, REPO
from vmware_pilot import __version__
from vmware_pilot.store.migrations import EXPANDS_AFTER, LATEST, needed_version

_RELEASED = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d\d-\d\d)\)$")


def _sections() -> list[tuple[str, str]]:
    """(heading, text) of each version's section of CHANGELOG.md, newest first."""
    parts = re.split(r"^(## .+)$", (REPO / "CHANGELOG.md").read_text(), flags=re.M)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]


def test_every_changelog_section_is_unreleased_or_a_dated_release_that_says_whether_it_migrates() -> None:
    sections = _sections()
    assert sections[0][0] == "## Unreleased"
    released = [_RELEASED.match(heading) for heading, _ in sections[1:]]
    assert all(released), [h for h, _ in sections[1:]]
    versions = [Version(m.group(1)) for m in released if m]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    for heading, body in sections:
        assert "**Migrates:**" in body, heading


def test_the_previous_release_is_the_newest_in_the_changelog_with_its_tag_and_commit() -> None:
    heading, body = _sections()[1]
    assert heading == f"## {PREVIOUS['version']} ({PREVIOUS['date']})"
    assert PREVIOUS["tag"] == f"v{PREVIOUS['version']}"
    assert re.fullmatch(r"[0-9a-f]{40}", str(PREVIOUS["commit"]))
    assert f"Tag `{PREVIOUS['tag']}`, commit `{PREVIOUS['commit']}`" in body
    assert Version(__version__) > Version(str(PREVIOUS["version"])), "bump the version after a release"


def test_this_schema_stays_usable_by_the_previous_release() -> None:
    # A contraction that retires the previous release waits until release/previous.json moves on.
    assert EXPANDS_AFTER <= int(str(PREVIOUS["schema_version"])) <= LATEST
    assert needed_version(LATEST) <= int(str(PREVIOUS["schema_version"]))
