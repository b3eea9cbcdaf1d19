"""The templates folder as a ``kept.TextSource``: each ``*.yaml``/``*.yml`` file is a text kept
under its file name, stamped with the SHA-256 of its text (read and hashed at each listing, parsed
once per change). A file that cannot be read (a link out of the folder, too large, not UTF-8) is
stamped None, and ``read`` raises why as TemplateError.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from pathlib import Path

from vmware_pilot.errors import TemplateError
from vmware_pilot.templates.custom import digest_of, read_text, template_files

__all__ = ["TemplateFolder"]


class TemplateFolder:
    """Custom templates as files of ``folder``."""

    in_database = False

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def where(self) -> str:
        return str(self.folder)

    def stamps(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        for path in template_files(self.folder):
            try:
                out.append((path.name, digest_of(read_text(path))))
            except TemplateError:  # stamped None: ``read`` says why
                out.append((path.name, None))
        return out

    def read(self, key: str) -> str | None:
        path = self.folder / key
        if not (path.is_symlink() or path.exists()):
            return None
        return read_text(path)

    def read_many(self, keys: Collection[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key in keys:
            with contextlib.suppress(TemplateError):  # ``read`` says why, when asked alone
                text = self.read(key)
                if text is not None:
                    out[key] = text
        return out

    def put(self, key: str, text: str, previous: str | None, by: str) -> bool:
        """Write ``key`` (0600, replaced atomically); OSError when the folder cannot take it."""
        # Imported here: writing YAML is needed only when a template is saved, not to serve.
        from vmware_pilot.templates.saving import write_text

        write_text(self.folder, Path(key).stem, text)
        return True

    def delete(self, key: str, previous: str | None = None) -> bool:
        path = self.folder / key
        existed = path.is_symlink() or path.exists()
        path.unlink(missing_ok=True)
        return existed
