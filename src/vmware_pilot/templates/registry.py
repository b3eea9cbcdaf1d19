"""One registry for built-in and custom YAML templates: list, create, validate names, save.

Built-ins come first and cannot be shadowed: a YAML file reusing a built-in name is listed as
broken with a message to rename it. Custom files are re-read on every call (hot reload).

With ``rows`` (a database URL is set: several replicas may share it) the custom templates are rows
of the database instead of files of the folder, read on every call too, with the same checks, the
same authorship rule and the same names (``<name>.yaml``) in listings and messages.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.errors import InvalidInput, PilotError, TemplateError, excerpt
from vmware_pilot.safety.gating import enforce
from vmware_pilot.templates.builtin import BUILTINS, BuiltinTemplate
from vmware_pilot.templates.custom import (
    BrokenFile,
    CustomTemplate,
    literal_secrets,
    load_file,
    load_folder,
    load_rows,
    load_text,
    name_problem,
    read_text,
)
from vmware_pilot.templates.discovery import builtin_parameters, custom_parameters, example_call
from vmware_pilot.templates.steps import check_plan
from vmware_pilot.templates.toolfacts import ToolFacts

__all__ = ["TemplateRegistry", "TemplateRows"]

_log = logging.getLogger(__name__)


class TemplateRows(Protocol):
    """Stored custom templates (``SqlStore``): (name, YAML text) rows, written compare-and-set."""

    def template_rows(self, name: str | None = None) -> list[tuple[str, str]]: ...
    def put_template(self, name: str, body: str, previous: str | None, by: str) -> bool: ...
    def delete_template(self, name: str, previous: str | None = None) -> bool: ...


class TemplateRegistry:
    """Templates for ``list_workflows`` and ``create_workflow_from_template``.

    ``catalog`` may be a Catalog or a function returning the current one (read on each call).
    ``home`` renders file paths as ``~/…`` in gate refusals (default: the user's home).
    ``rows``: keep custom templates there instead of in ``templates_dir``.
    """

    def __init__(
        self,
        templates_dir: Path,
        catalog: Catalog | Callable[[], Catalog],
        home: Path | None = None,
        rows: TemplateRows | None = None,
    ) -> None:
        self.templates_dir = templates_dir
        self._catalog = catalog
        self.home = home if home is not None else Path.home()
        self.rows = rows
        self._builtins: dict[str, BuiltinTemplate[Any]] = {b.name: b for b in BUILTINS}
        # The built-ins' step counts for the catalog they were counted against: planning every
        # built-in again cost most of each list_workflows call.
        self._counted: tuple[Catalog, dict[str, int | None]] | None = None

    @property
    def where(self) -> str:
        """Where custom templates are kept, for people: the folder, or the database."""
        return "the database" if self.rows is not None else str(self.templates_dir)

    def _load(self) -> tuple[list[CustomTemplate], list[BrokenFile]]:
        if self.rows is not None:
            return load_rows(self.rows.template_rows(), self._builtins)
        return load_folder(self.templates_dir, self._builtins)

    def _path(self, name: str) -> Path:
        """The file of template ``name`` (stored ones are named ``<name>.yaml`` too)."""
        return Path(f"{name}.yaml") if self.rows is not None else self.templates_dir / f"{name}.yaml"

    def _stored(self, name: str) -> str | None:
        assert self.rows is not None
        found = self.rows.template_rows(name)
        return found[0][1] if found else None

    # --- helpers ----------------------------------------------------------------------------
    def _current_catalog(self) -> Catalog:
        return self._catalog if isinstance(self._catalog, Catalog) else self._catalog()

    def _facts(self, catalog: Catalog) -> ToolFacts:
        def schema(skill: str, tool: str) -> Mapping[str, Any] | None:
            info = catalog.tool(skill, tool)
            return info.input_schema if info is not None else None

        return ToolFacts(schema)

    def _step_counts(self, catalog: Catalog) -> dict[str, int | None]:
        """Each built-in's step count from its defaults (or first example) against ``catalog``,
        counted again only when the catalog is another one (a refresh)."""
        if self._counted is None or self._counted[0] is not catalog:
            facts = self._facts(catalog)
            self._counted = (catalog, {b.name: b.default_step_count(facts) for b in BUILTINS})
        return self._counted[1]

    def _shown(self, path: Path) -> str:
        """``~/<path relative to home>``, or the absolute path outside the home."""
        if self.rows is not None:
            return f"the stored template {path.name}"
        try:
            return "~/" + path.resolve().relative_to(self.home.resolve()).as_posix()
        except ValueError:
            return str(path)

    # --- queries ----------------------------------------------------------------------------
    def builtin_names(self) -> list[str]:
        """Built-in names in registry order."""
        return list(self._builtins)

    def builtin(self, name: str) -> BuiltinTemplate[Any] | None:
        return self._builtins.get(name)

    def listing(self) -> list[dict[str, Any]]:
        """Built-ins, then one entry per custom file sorted by file name (broken ones with ``error``).

        Each usable entry has ``parameters`` and an ``example`` call (``templates.discovery``).
        """
        counts = self._step_counts(self._current_catalog())
        out: list[dict[str, Any]] = [self._builtin_entry(b, counts[b.name]) for b in BUILTINS]
        good, broken = self._load()
        entries: list[tuple[str, dict[str, Any]]] = [(t.path.name, self._custom_entry(t)) for t in good]
        entries += [
            (b.path.name, {"name": b.name, "file": b.path.name, "type": "custom", "error": b.error})
            for b in broken
        ]
        out += [entry for _, entry in sorted(entries, key=lambda e: e[0])]
        return out

    def describe(self, name: str) -> dict[str, Any]:
        """The ``listing`` entry of template ``name``; TemplateError (with the names) when unknown."""
        entry = next((e for e in self.listing() if e["name"] == name), None)
        if entry is None:
            raise TemplateError(
                f"Unknown template: {name}",
                hint="Call list_workflows() (or read pilot://templates) to see every template name.",
            )
        return entry

    @staticmethod
    def _builtin_entry(b: BuiltinTemplate[Any], steps: int | None) -> dict[str, Any]:
        parameters = builtin_parameters(b)
        return {
            "name": b.name,
            "type": "builtin",
            "description": b.description,
            "steps": steps,
            "parameters": parameters,
            "example": example_call(b.name, parameters, b.examples),
        }

    @staticmethod
    def _custom_entry(t: CustomTemplate) -> dict[str, Any]:
        parameters = custom_parameters(t)
        return {
            "name": t.name,
            "description": t.description,
            "file": t.path.name,
            "steps": len(t.raw_steps),
            "type": "custom",
            "parameters": parameters,
            "example": example_call(t.name, parameters),
        }

    # --- creation ---------------------------------------------------------------------------
    def create(self, workflow_type: str, params: dict[str, Any], created_by: str) -> Workflow:
        """A new pending workflow from a template (nothing is stored here)."""
        catalog = self._current_catalog()
        builtin = self._builtins.get(workflow_type)
        if builtin is not None:
            plan = builtin.plan(params, self._facts(catalog))
            check_plan(plan.steps)  # built-ins pass the same plan rules as every other door
            return Workflow.new(workflow_type, WorkflowState.PENDING, plan.steps, plan.params, created_by)
        good, broken = self._load()
        custom = next((t for t in good if t.name == workflow_type), None)
        if custom is not None:
            return self._create_custom(custom, params, created_by, catalog)
        bad = next((b for b in broken if b.name == workflow_type), None)
        if bad is not None:
            raise TemplateError(
                f"Custom template '{workflow_type}' cannot be used: {bad.error}",
                hint=f"Fix {self._shown(bad.path)} (list_workflows shows the error), then try again.",
            )
        available = [*self._builtins, *(t.name for t in good)]
        raise TemplateError(
            f"Unknown workflow type: {excerpt(workflow_type)}. Available: {available!r}",
            hint="Call list_workflows() to see every template with its description, then use one of "
            "those names as workflow_type.",
        )

    def _create_custom(
        self, tpl: CustomTemplate, params: Mapping[str, Any] | None, created_by: str, catalog: Catalog
    ) -> Workflow:
        values = tpl.bind(params)
        steps = tpl.render(values)
        wf_params = {**tpl.recorded(values), "_source": tpl.path.name, "_description": tpl.description}
        wf = Workflow.new(tpl.name, WorkflowState.PENDING, steps, wf_params, created_by)
        for author in tpl.authors:
            wf.with_author(author)
        enforce(
            wf,
            catalog,
            verb="plan",
            retry=f"call create_workflow_from_template('{tpl.name}', ...) again",
            source=self._shown(tpl.path),
        )
        return wf

    # --- saving -----------------------------------------------------------------------------
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
        if name in self._builtins:
            raise InvalidInput(
                f"Cannot save the template as '{name}': that is a built-in template name",
                field="name",
                hint=f"Choose another name, for example '{name}_custom'.",
            )
        own = {self._path(name)}
        good, _ = self._load()
        other = next((t for t in good if t.name == name and t.path not in own), None)
        if other is not None:
            raise InvalidInput(
                f"Cannot save the template as '{name}': {other.path.name} already defines that name",
                field="name",
                hint=f"Choose another name, or remove or rename {self._shown(other.path)} first.",
            )

    def _owners(self, name: str, caller: str, stored: str | None = None) -> list[str]:
        """The authors of the template ``<name>.yaml`` already holds ([] when there is none);
        ``stored``: its text, when it is a row.

        Replacing a template is its authors' right: anyone else, or any file that cannot be read
        (so its authors are unknown), is refused with a free name to use instead."""
        target = self._path(name)
        if stored is None and (self.rows is not None or not (target.is_symlink() or target.exists())):
            return []
        free = (
            f"An operator can free the name with `vmware-pilot templates remove {name}`."
            if self.rows is not None
            else f"An operator can remove {self._shown(target)} to free the name."
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
                    load_text(stored, target, self._builtins)
                    if stored is not None
                    else load_file(target, self._builtins)
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
        taken = {n for n, _ in self.rows.template_rows()} if self.rows is not None else set()
        for n in range(2, 1000):
            candidate = f"{name[:90]}_{n}"
            if candidate in taken or candidate in self._builtins:
                continue
            if self.rows is not None or not (self.templates_dir / f"{candidate}.yaml").exists():
                return candidate
        return f"{name[:90]}_new"

    @contextlib.contextmanager
    def saving(
        self, name: str, description: str, steps: Sequence[Step], authors: Sequence[str], caller: str
    ) -> Iterator[Path]:
        """Write ``<templates_dir>/<name>.yaml`` (0600, secrets masked) and yield its path; when the
        block raises (the workflow could not be stored), put back what was there before.

        The authors are kept: those of the template it replaces, then ``authors``."""
        # Imported here: writing YAML is needed only when a template is saved, not to serve.
        from vmware_pilot.templates.saving import restore_template, template_document, write_template

        self.validate_template_name(name)
        if self.rows is not None:
            with self._saving_row(name, description, steps, authors, caller) as path:
                yield path
            return
        kept = self._owners(name, caller)
        target = self.templates_dir / f"{name}.yaml"
        previous = target.read_bytes() if kept else None
        try:
            path = write_template(
                self.templates_dir, name, template_document(name, description, steps, [*kept, *authors])
            )
        except OSError as exc:
            raise TemplateError(
                f"Could not write the template {name}.yaml in {self.templates_dir} "
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

        assert self.rows is not None
        previous = self._stored(name)
        kept = self._owners(name, caller, previous)
        body = template_text(template_document(name, description, steps, [*kept, *authors]))
        if not self.rows.put_template(name, body, previous, caller):
            raise InvalidInput(
                f"Cannot save the template as '{name}': it was changed by someone else while this "
                "was saved; nothing was saved",
                field="name",
                hint="Call again: list_workflows shows the template as it is now.",
            )
        try:
            yield self._path(name)
        except BaseException:
            try:
                if previous is None:
                    self.rows.delete_template(name, body)
                else:
                    self.rows.put_template(name, previous, body, caller)
            except PilotError:  # the caller hears why the workflow failed; the log, why this did
                _log.exception("could not take back the stored template %s after a failed save", name)
            raise

    # --- operators: import and export ---------------------------------------------------------
    def import_folder(self, folder: Path, by: str) -> list[dict[str, Any]]:
        """Each template file of ``folder``, checked as the folder loader checks it, stored whole
        or not at all: ``{file, name, outcome}`` (added, replaced, unchanged) or ``{file, name,
        error}``. A template holding a secret in clear is refused when templates are rows."""
        good, broken = load_folder(folder, self._builtins)
        report: list[tuple[str, dict[str, Any]]] = [
            (b.path.name, {"file": b.path.name, "name": b.name, "error": b.error}) for b in broken
        ]
        for tpl in good:
            entry: dict[str, Any] = {"file": tpl.path.name, "name": tpl.name}
            try:
                entry["outcome"] = self._import_one(tpl, by)
            except PilotError as exc:
                entry["error"] = exc.message
            report.append((tpl.path.name, entry))
        return [entry for _, entry in sorted(report, key=lambda e: e[0])]

    def _import_one(self, tpl: CustomTemplate, by: str) -> str:
        text = read_text(tpl.path)
        checked = load_text(text, tpl.path, self._builtins)  # the text stored is the text checked
        if checked.name != tpl.name:
            raise TemplateError(f"{tpl.path.name}: the file changed while it was imported")
        name = checked.name
        if self.rows is None:
            return self._import_file(name, text)
        clear = literal_secrets(checked)
        if clear:
            raise TemplateError(
                f"{tpl.path.name}: holds a secret in clear ({', '.join(clear[:3])}); a template "
                'stored in the database may not. Use {"$env": "NAME"} or a {{parameter}}',
            )
        previous = self._stored(name)
        if previous == text:
            return "unchanged"
        if not self.rows.put_template(name, text, previous, by):
            raise TemplateError(
                f"{tpl.path.name}: '{name}' was changed by someone else meanwhile; import again"
            )
        return "added" if previous is None else "replaced"

    def _import_file(self, name: str, text: str) -> str:
        from vmware_pilot.templates.saving import write_text

        self.validate_template_name(name)
        target = self.templates_dir / f"{name}.yaml"
        previous = read_text(target) if (target.is_symlink() or target.exists()) else None
        if previous == text:
            return "unchanged"
        try:
            write_text(self.templates_dir, name, text)
        except OSError as exc:
            raise TemplateError(f"could not write {target} ({exc.strerror or exc})") from exc
        return "added" if previous is None else "replaced"

    def export_texts(self) -> tuple[list[tuple[str, str]], list[BrokenFile]]:
        """(name, YAML text) of every usable custom template, secrets masked, and the broken ones.

        A text is written as stored when it holds no secret in clear (so it imports back as it
        was); otherwise its document is written again with the secrets masked."""
        from vmware_pilot.templates.saving import template_text
        from vmware_pilot.templates.yamlsafe import load_yaml

        good, broken = self._load()
        out: list[tuple[str, str]] = []
        for tpl in good:
            text = self._stored(tpl.name) if self.rows is not None else read_text(tpl.path)
            if text is None:  # removed since it was listed
                continue
            if literal_secrets(tpl):
                from vmware_pilot.safety.redaction import redact

                document = load_yaml(text)
                document["steps"] = redact(document["steps"], scrub_text=False)
                text = template_text(document)
            out.append((tpl.name, text))
        return out, broken

    def remove(self, name: str) -> bool:
        """Remove custom template ``name`` (False when there is none)."""
        if self.rows is not None:
            return self.rows.delete_template(name)
        good, broken = self._load()
        paths = [t.path for t in good if t.name == name] + [b.path for b in broken if b.name == name]
        for path in paths:  # the file defining it, and any broken one that claims the name
            path.unlink(missing_ok=True)
        return bool(paths)

    def save_as_template(
        self, name: str, description: str, steps: Sequence[Step], authors: list[str], *, caller: str
    ) -> Path:
        """Write ``<templates_dir>/<name>.yaml`` (see ``saving``) and return its path."""
        with self.saving(name, description, steps, authors, caller) as path:
            return path
