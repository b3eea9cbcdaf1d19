"""Keeping custom templates: saving a workflow's steps as one (the authorship rule: replacing a
template is its authors' right), importing a folder of template files, exporting every usable one
with its secrets masked. The same rules for the folder and for the database's rows; where they
differ (a row is compare-and-set, a stored template may hold no secret in clear) it says so.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmware_pilot.domain.model import Step
from vmware_pilot.errors import InvalidInput, PilotError, TemplateError, excerpt
from vmware_pilot.templates.custom import (
    MAX_SAVED_BYTES,
    BrokenFile,
    CustomTemplate,
    check_text,
    literal_secrets,
    load_file,
    load_text,
    masked_document,
    name_problem,
    read_text,
    template_files,
)

if TYPE_CHECKING:
    from vmware_pilot.templates.registry import TemplateRegistry

__all__ = ["TemplateKeeper", "oversized"]

_log = logging.getLogger(__name__)


class TemplateKeeper:
    """Saves, imports and exports the custom templates of ``registry``, wherever they are kept."""

    def __init__(self, registry: TemplateRegistry) -> None:
        self.registry = registry
        self.source = registry.source

    def validate_template_name(self, name: str) -> None:
        """Refuse a name that cannot be saved as ``<name>.yaml`` or would clash with another template."""
        problem = name_problem(name)
        if problem:
            raise InvalidInput(
                f"Cannot save the template as {excerpt(name)!r}: {problem}",
                field="name",
                hint="Choose a simple name such as 'restart_web_tier' (no '/', '\\', leading '.', or "
                "control characters; at most 100 characters).",
            )
        if name in self.registry.builtin_names():
            raise InvalidInput(
                f"Cannot save the template as '{name}': that is a built-in template name",
                field="name",
                hint=f"Choose another name, for example '{name}_custom'.",
            )
        own = {self.registry.path(name)}
        good, _ = self.registry.load()
        other = next((t for t in good if t.name == name and t.path not in own), None)
        if other is not None:
            raise InvalidInput(
                f"Cannot save the template as '{name}': {other.path.name} already defines that name",
                field="name",
                hint=f"Choose another name, or remove or rename {self.registry.shown(other.path)} first.",
            )

    def _owners(self, name: str, caller: str, stored: str | None = None) -> list[str]:
        """The authors of the template ``<name>.yaml`` already holds ([] when there is none);
        ``stored``: its text, when it is a row.

        Replacing a template is its authors' right: anyone else, or any file that cannot be read
        (so its authors are unknown), is refused with a free name to use instead."""
        target = self.registry.path(name)
        if stored is None and (self.source.in_database or not (target.is_symlink() or target.exists())):
            return []
        free = (
            f"An operator can free the name with `vmware-pilot templates remove {name}`."
            if self.source.in_database
            else f"An operator can remove {self.registry.shown(target)} to free the name."
        )
        hint = (
            f"Choose another name, for example '{self._free_name(name)}' (create_workflow's name, "
            f"or update_draft(name=...) before confirm_draft). {free}"
        )
        why = ""
        authors: tuple[str, ...] = ()
        if stored is None and target.is_symlink():
            why = "it is a symbolic link"
        else:
            try:
                authors = (
                    load_text(stored, target, self.registry.builtin_names())
                    if stored is not None
                    else load_file(target, self.registry.builtin_names())
                ).authors
            except TemplateError:
                why = "that file cannot be read, so its authors are unknown"
        if not why and (not caller or caller not in authors):
            who = ", ".join(authors) if authors else "nobody recorded (written by hand)"
            why = f"it belongs to its authors ({who}), and only they may replace it"
        if why:
            raise InvalidInput(
                f"Cannot save the template as '{name}': {target.name} already exists and {why}; "
                "nothing was saved",
                field="name",
                hint=hint,
            )
        return list(authors)

    def _free_name(self, name: str) -> str:
        taken = {n for n, _ in self.source.stamps()} if self.source.in_database else set()
        for n in range(2, 1000):
            candidate = f"{name[:90]}_{n}"
            if candidate in taken or candidate in self.registry.builtin_names():
                continue
            if self.source.in_database or not (self.registry.templates_dir / f"{candidate}.yaml").exists():
                return candidate
        return f"{name[:90]}_new"

    def _refuse_saving(self, name: str, text: str) -> None:
        too_large = oversized(text)
        if too_large:
            raise InvalidInput(
                f"Cannot save the template as '{name}': it would be {too_large}; nothing was saved",
                field="save_as_template",
                hint="Call again with save_as_template=false (the workflow itself is not limited by "
                "this), or save a smaller plan: fewer steps, shorter texts.",
            )

    @contextlib.contextmanager
    def saving(
        self, name: str, description: str, steps: Sequence[Step], authors: Sequence[str], caller: str
    ) -> Iterator[Path]:
        """Write ``<templates_dir>/<name>.yaml`` (0600, secrets masked) and yield its path; when the
        block raises (the workflow could not be stored), put back what was there before.

        The authors are kept: those of the template it replaces, then ``authors``."""
        # Imported here: writing YAML is needed only when a template is saved, not to serve.
        from vmware_pilot.templates.saving import (
            restore_template,
            template_document,
            template_text,
            write_text,
        )

        self.validate_template_name(name)
        if self.source.in_database:
            with self._saving_row(name, description, steps, authors, caller) as path:
                yield path
            return
        kept = self._owners(name, caller)
        target = self.registry.templates_dir / f"{name}.yaml"
        text = template_text(template_document(name, description, steps, [*kept, *authors]))
        self._refuse_saving(name, text)
        previous = target.read_bytes() if kept else None
        try:
            path = write_text(self.registry.templates_dir, name, text)
        except OSError as exc:
            raise TemplateError(
                f"Could not write the template {name}.yaml in {self.registry.templates_dir} "
                f"({exc.strerror or exc}); nothing was saved",
                hint="Make that folder a writable directory (VMWARE_PILOT_TEMPLATES_DIR chooses another), "
                "or call again with save_as_template=false.",
            ) from exc
        try:
            yield path
        except BaseException:
            try:
                if previous is None:
                    path.unlink(missing_ok=True)
                else:
                    restore_template(path, previous)
            except OSError:  # the caller hears why the workflow failed; the log, why this did
                _log.exception("could not take back the template %s after a failed save", path.name)
            raise

    @contextlib.contextmanager
    def _saving_row(
        self, name: str, description: str, steps: Sequence[Step], authors: Sequence[str], caller: str
    ) -> Iterator[Path]:
        """``saving`` for stored templates: the row is written only if nobody changed it meanwhile."""
        from vmware_pilot.templates.saving import template_document, template_text

        assert self.source.in_database
        previous = self.source.read(name)
        kept = self._owners(name, caller, previous)
        body = template_text(template_document(name, description, steps, [*kept, *authors]))
        self._refuse_saving(name, body)
        if not self.source.put(name, body, previous, caller):
            raise InvalidInput(
                f"Cannot save the template as '{name}': it was changed by someone else while this "
                "was saved; nothing was saved",
                field="name",
                hint="Call again: list_workflows shows the template as it is now.",
            )
        try:
            yield self.registry.path(name)
        except BaseException:
            try:
                if previous is None:
                    self.source.delete(name, body)
                else:
                    self.source.put(name, previous, body, caller)
            except PilotError:  # the caller hears why the workflow failed; the log, why this did
                _log.exception("could not take back the stored template %s after a failed save", name)
            raise

    def import_folder(self, folder: Path, by: str) -> list[dict[str, Any]]:
        """Each template file of ``folder``, checked as the folder loader checks it, stored whole
        or not at all: ``{file, name, outcome}`` (added, replaced, unchanged) or ``{file, name,
        error}``. A template holding a secret in clear is refused when templates are rows.

        Linear in the files: each is read and parsed once, and the names already defined in the
        templates folder are read once for the whole import."""
        report: list[tuple[str, dict[str, Any]]] = []
        seen: dict[str, Path] = {}
        taken: dict[str, Path] | None = None  # the templates folder's names, read at the first file
        for path in template_files(folder):
            try:
                text = read_text(path)
            except TemplateError as exc:
                report.append((path.name, {"file": path.name, "name": path.stem, "error": exc.message}))
                continue
            checked = check_text(
                text, path, self.registry.builtin_names()
            )  # the text stored is the text checked
            if isinstance(checked, BrokenFile):
                report.append((path.name, {"file": path.name, "name": checked.name, "error": checked.error}))
                continue
            entry: dict[str, Any] = {"file": path.name, "name": checked.name}
            if checked.name in seen:
                entry["error"] = (
                    f"{path.name}: the name '{checked.name}' is already defined in "
                    f"{seen[checked.name].name}; rename one of them"
                )
                report.append((path.name, entry))
                continue
            seen[checked.name] = path
            try:
                if not self.source.in_database:
                    if taken is None:
                        taken = {t.name: t.path for t in self.registry.load()[0]}
                    entry["outcome"] = self._import_file(checked.name, text, taken)
                else:
                    entry["outcome"] = self._import_row(checked, text, by)
            except PilotError as exc:
                entry["error"] = exc.message
            report.append((path.name, entry))
        return [entry for _, entry in sorted(report, key=lambda e: e[0])]

    def _refuse_size(self, what: str, text: str) -> None:
        too_large = oversized(text)
        if too_large:
            raise TemplateError(
                f"{what} is {too_large}; nothing was stored",
                hint="Split it into several smaller templates, or shorten its texts and parameters.",
            )

    def _import_row(self, checked: CustomTemplate, text: str, by: str) -> str:
        assert self.source.in_database
        path, name = checked.path, checked.name
        self._refuse_size(path.name, text)
        clear = literal_secrets(checked)
        if clear:
            raise TemplateError(
                f"{path.name}: holds a secret in clear ({', '.join(clear[:3])}); a template "
                'stored in the database may not. Use {"$env": "NAME"} or a {{parameter}}',
            )
        previous = self.source.read(name)
        if previous == text:
            return "unchanged"
        if not self.source.put(name, text, previous, by):
            raise TemplateError(f"{path.name}: '{name}' was changed by someone else meanwhile; import again")
        return "added" if previous is None else "replaced"

    def _import_file(self, name: str, text: str, taken: dict[str, Path]) -> str:
        """Write ``text`` as ``<name>.yaml`` of the templates folder, unless another file of it
        defines ``name`` (``taken``: the folder's names, kept up to date here)."""
        from vmware_pilot.templates.saving import write_text

        target = self.registry.templates_dir / f"{name}.yaml"
        self._refuse_size(target.name, text)
        other = taken.get(name)
        if other is not None and other != target:
            raise InvalidInput(
                f"Cannot save the template as '{name}': {other.name} already defines that name",
                field="name",
                hint=f"Choose another name, or remove or rename {self.registry.shown(other)} first.",
            )
        previous = read_text(target) if (target.is_symlink() or target.exists()) else None
        if previous == text:
            return "unchanged"
        try:
            write_text(self.registry.templates_dir, name, text)
        except OSError as exc:
            raise TemplateError(f"could not write {target} ({exc.strerror or exc})") from exc
        taken[name] = target
        return "added" if previous is None else "replaced"

    def export_texts(self) -> tuple[list[tuple[str, str]], list[BrokenFile]]:
        """(name, YAML text) of every usable custom template, secrets masked, and the broken ones.

        A text is written as stored when it holds no secret in clear (so it imports back as it
        was); otherwise its document is written again with the secrets masked: values under
        secret keys, secret shapes in any text, and secret parameters' defaults."""
        from vmware_pilot.templates.saving import template_text
        from vmware_pilot.templates.yamlsafe import load_yaml

        good, broken = self.registry.load()
        out: list[tuple[str, str]] = []
        for tpl in good:
            key = tpl.name if self.source.in_database else tpl.path.name
            text = self.source.read(key)
            if text is None:  # removed since it was listed
                continue
            checked = self.registry.check(key, text, tpl.path).result  # as read now
            if not isinstance(checked, CustomTemplate):
                continue
            if literal_secrets(checked):
                text = template_text(masked_document(load_yaml(text)))
            out.append((tpl.name, text))
        return out, broken


def oversized(text: str) -> str:
    """Why ``text`` is too large for Pilot to save or import ("" when it is not): every Pilot
    that lists a template parses it."""
    size = len(text.encode("utf-8"))
    if size <= MAX_SAVED_BYTES:
        return ""
    return f"{size} bytes of YAML, and a template Pilot saves may be at most {MAX_SAVED_BYTES} bytes"
