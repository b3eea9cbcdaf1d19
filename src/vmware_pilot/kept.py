"""Where a text Pilot reads is kept: files of the Pilot home, or (a database URL is set: several
replicas may share it) rows of the database. One seam, ``TextSource``, for the custom templates
(``templates/folder.py``: a folder of YAML files) and the policy (``policy/source.py``: one
file); ``DatabaseTexts`` is the database side of both, built from the store's functions.

A text is kept under a key (a file name, a template name, the policy's one key) with a stamp
that changes whenever the text does, so a reader parses a text once per change.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

__all__ = ["DatabaseTexts", "TextSource"]


class TextSource(Protocol):
    """Texts kept under keys: a folder's files (or one file), or the database's rows."""

    @property
    def where(self) -> str:
        """For people: the folder or file, or "the database"."""
        ...

    @property
    def in_database(self) -> bool:
        """Whether the texts are rows of the database (every replica sees them)."""
        ...

    def stamps(self) -> list[tuple[str, object]]:
        """(key, stamp) of every text kept, by key; a stamp changes whenever its text does."""
        ...

    def read(self, key: str) -> str | None:
        """The text kept under ``key`` (None: there is none)."""
        ...

    def read_many(self, keys: Collection[str]) -> dict[str, str]:
        """The texts of ``keys`` that can be read, by key (the database reads them at once)."""
        ...

    def put(self, key: str, text: str, previous: str | None, by: str) -> bool:
        """Keep ``text`` under ``key`` (``by``: who); False, nothing changed, when what is kept is
        no longer ``previous`` (the database compares and sets; a file is written over)."""
        ...

    def delete(self, key: str, previous: str | None = None) -> bool:
        """Remove what ``key`` keeps (only while it is ``previous``, when given); False when none."""
        ...


def _refused(*_: object) -> bool:
    raise ValueError("this text cannot be removed")


@dataclass(frozen=True)
class DatabaseTexts:
    """``TextSource`` of rows of the database, from the store's functions: ``stamped`` (key,
    digest) rows, ``rows`` (key, text) for one key or all, ``put_row`` compare-and-set and
    ``delete_row``."""

    stamped: Callable[[], list[tuple[str, str]]]
    rows: Callable[[str | None], list[tuple[str, str]]]
    put_row: Callable[[str, str, str | None, str], bool]
    delete_row: Callable[[str, str | None], bool] = _refused

    where = "the database"
    in_database = True

    def stamps(self) -> list[tuple[str, object]]:
        return list(self.stamped())

    def read(self, key: str) -> str | None:
        found = self.rows(key)
        return found[0][1] if found else None

    def read_many(self, keys: Collection[str]) -> dict[str, str]:
        if len(keys) == 1:
            return dict(self.rows(next(iter(keys))))
        wanted = set(keys)
        return {k: t for k, t in self.rows(None) if k in wanted}

    def put(self, key: str, text: str, previous: str | None, by: str) -> bool:
        return self.put_row(key, text, previous, by)

    def delete(self, key: str, previous: str | None = None) -> bool:
        return self.delete_row(key, previous)
