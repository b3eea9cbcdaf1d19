"""One registry for built-in and custom YAML templates: list, create, validate names, save.

Built-ins come first and cannot be shadowed: a YAML file reusing a built-in name is listed as
broken with a message to rename it. Custom files are looked at on every call (hot reload), but
each text is parsed and checked once per change: what was checked is kept by file name and the
SHA-256 of the text, and a listing only reads and hashes the texts (or, on PostgreSQL, asks the
database for their digests) to know which changed. A text that cannot be used is logged once,
when it is first seen, with its file, line and column.

With ``rows`` (a database URL is set: several replicas may share it) the custom templates are rows
of the database instead of files of the folder, with the same checks, the same authorship rule
and the same names (``<name>.yaml``) in listings and messages; a change saved by another replica
has another digest, so it is seen at the next call.

Parsing costs time in proportion to the text: the server calls the registry from worker threads,
never on the event loop, and what Pilot saves or imports is at most ``MAX_SAVED_BYTES``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.errors import InvalidInput, PilotError, TemplateError, excerpt
from vmware_pilot.safety.gating import enforce
from vmware_pilot.templates.builtin import BUILTINS, BuiltinTemplate
from vmware_pilot.templates.custom import (
    MAX_SAVED_BYTES,
    BrokenFile,
    CustomTemplate,
    check_text,
    digest_of,
    excerpt_name,
    literal_secrets,
    load_file,
    load_text,
    masked_document,
    name_problem,
    read_text,
    template_files,
)
from vmware_pilot.templates.discovery import builtin_parameters, custom_parameters, example_call
from vmware_pilot.templates.steps import check_plan
from vmware_pilot.templates.toolfacts import ToolFacts

__all__ = ["TemplateRegistry", "TemplateRows"]

_log = logging.getLogger(__name__)


class TemplateRows(Protocol):
    """Stored custom templates (``store.texts.TemplateRows``): (name, YAML text) rows, written compare-and-set."""

    def template_rows(self, name: str | None = None) -> list[tuple[str, str]]: ...
    def template_digests(self) -> list[tuple[str, str]]: ...
    def put_template(self, name: str, body: str, previous: str | None, by: str) -> bool: ...
    def delete_template(self, name: str, previous: str | None = None) -> bool: ...


@dataclass(slots=True)
class _Checked:
    """One custom template's text as checked: its digest, the template or why it cannot be used,
    and (for a usable one) its listing entry, built once."""

    digest: str
    result: CustomTemplate | BrokenFile
    entry: dict[str, Any] | None = field(default=None)


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
        # What each custom text was found to be, by file name (or row name), with its digest;
        # the lock makes concurrent listings wait for one parse instead of each doing it.
        self._checked: dict[str, _Checked] = {}
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """Where custom templates are kept, for people: the folder, or the database."""
        return "the database" if self.rows is not None else str(self.templates_dir)

    def _load(self) -> tuple[list[CustomTemplate], list[BrokenFile]]:
        """Every usable custom template (the first file wins a name) and every one that cannot be
        used, each text checked once per change (``_check``)."""
        checked = self._checked_rows() if self.rows is not None else self._checked_files()
        good: list[CustomTemplate] = []
        broken: list[BrokenFile] = []
        seen: dict[str, Path] = {}
        for result in checked:
            if isinstance(result, BrokenFile):
                broken.append(result)
            elif result.name in seen:
                broken.append(
                    BrokenFile(
                        result.path,
                        result.name,
                        f"{result.path.name}: the name '{result.name}' is already defined in "
                        f"{seen[result.name].name}; rename one of them",
                    )
                )
            else:
                seen[result.name] = result.path
                good.append(result)
        return good, broken

    def _checked_files(self) -> list[CustomTemplate | BrokenFile]:
        out: list[CustomTemplate | BrokenFile] = []
        paths = template_files(self.templates_dir)
        for path in paths:
            try:
                text = read_text(path)
            except TemplateError as exc:  # a link out of the folder, too large, not UTF-8: not parsed
                out.append(BrokenFile(path, path.stem, exc.message))
                continue
            out.append(self._check(path.name, text, path).result)
        self._keep({p.name for p in paths})
        return out

    def _checked_rows(self) -> list[CustomTemplate | BrokenFile]:
        """The stored templates: their digests are read on every call, a text only when its
        digest is not the one checked (another replica saved it, or this process never saw it)."""
        assert self.rows is not None
        digests = self.rows.template_digests()
        with self._lock:
            stale = [n for n, d in digests if (c := self._checked.get(n)) is None or c.digest != d]
        texts: dict[str, str] = {}
        if len(stale) == 1:
            texts = dict(self.rows.template_rows(stale[0]))
        elif stale:
            wanted = set(stale)
            texts = {n: t for n, t in self.rows.template_rows() if n in wanted}
        out: list[CustomTemplate | BrokenFile] = []
        for name, _ in digests:
            path = Path(f"{name}.yaml")
            if name not in texts and name not in stale:
                with self._lock:
                    known = self._checked.get(name)
                if known is not None:
                    out.append(known.result)
                    continue
                texts.update(self.rows.template_rows(name))  # forgotten meanwhile by another call
            if name in texts:
                out.append(self._check(name, texts[name], path, row=name).result)
            # else: removed between the two reads; not listed
        self._keep({n for n, _ in digests})
        return out

    def _check(self, key: str, text: str, path: Path, row: str | None = None) -> _Checked:
        """``text`` checked: as it was when its digest was last seen under ``key``, else parsed
        now (once, whoever else asks meanwhile). A text that cannot be used is logged once."""
        digest = digest_of(text)
        with self._lock:
            known = self._checked.get(key)
            if known is not None and known.digest == digest:
                return known
            result = check_text(text, path, self._builtins)
            if row is not None and isinstance(result, CustomTemplate) and result.name != row:
                error = f"{path.name}: its text names the template '{excerpt_name(result.name)}'"
                result = BrokenFile(path, row, error)
            elif row is not None and isinstance(result, BrokenFile):
                result = BrokenFile(path, row, result.error)
            if isinstance(result, BrokenFile):
                _log.warning("custom template %s cannot be used: %s", self._shown(path), result.error)
            checked = _Checked(digest, result)
            if isinstance(result, CustomTemplate):
                checked.entry = self._custom_entry(result)
            self._checked[key] = checked
            return checked

    def _keep(self, keys: set[str]) -> None:
        """Forget what was checked for texts that are gone."""
        with self._lock:
            for key in [k for k in self._checked if k not in keys]:
                del self._checked[key]

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
        entries: list[tuple[str, dict[str, Any]]] = [(t.path.name, self._entry(t)) for t in good]
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

    def _entry(self, t: CustomTemplate) -> dict[str, Any]:
        """The listing entry of ``t``, as built when its text was checked."""
        key = t.name if self.rows is not None else t.path.name
        with self._lock:
            known = self._checked.get(key)
        if known is not None and known.result is t and known.entry is not None:
            return dict(known.entry)
        return self._custom_entry(t)

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

    @staticmethod
    def _oversized(text: str) -> str:
        """Why ``text`` is too large for Pilot to save or import ("" when it is not): every Pilot
        that lists a template parses it."""
        size = len(text.encode("utf-8"))
        if size <= MAX_SAVED_BYTES:
            return ""
        return f"{size} bytes of YAML, and a template Pilot saves may be at most {MAX_SAVED_BYTES} bytes"

    def _refuse_saving(self, name: str, text: str) -> None:
        too_large = self._oversized(text)
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
        if self.rows is not None:
            with self._saving_row(name, description, steps, authors, caller) as path:
                yield path
            return
        kept = self._owners(name, caller)
        target = self.templates_dir / f"{name}.yaml"
        text = template_text(template_document(name, description, steps, [*kept, *authors]))
        self._refuse_saving(name, text)
        previous = target.read_bytes() if kept else None
        try:
            path = write_text(self.templates_dir, name, text)
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
        self._refuse_saving(name, body)
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
            checked = check_text(text, path, self._builtins)  # the text stored is the text checked
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
                if self.rows is None:
                    if taken is None:
                        taken = {t.name: t.path for t in self._load()[0]}
                    entry["outcome"] = self._import_file(checked.name, text, taken)
                else:
                    entry["outcome"] = self._import_row(checked, text, by)
            except PilotError as exc:
                entry["error"] = exc.message
            report.append((path.name, entry))
        return [entry for _, entry in sorted(report, key=lambda e: e[0])]

    def _refuse_size(self, what: str, text: str) -> None:
        too_large = self._oversized(text)
        if too_large:
            raise TemplateError(
                f"{what} is {too_large}; nothing was stored",
                hint="Split it into several smaller templates, or shorten its texts and parameters.",
            )

    def _import_row(self, checked: CustomTemplate, text: str, by: str) -> str:
        assert self.rows is not None
        path, name = checked.path, checked.name
        self._refuse_size(path.name, text)
        clear = literal_secrets(checked)
        if clear:
            raise TemplateError(
                f"{path.name}: holds a secret in clear ({', '.join(clear[:3])}); a template "
                'stored in the database may not. Use {"$env": "NAME"} or a {{parameter}}',
            )
        previous = self._stored(name)
        if previous == text:
            return "unchanged"
        if not self.rows.put_template(name, text, previous, by):
            raise TemplateError(f"{path.name}: '{name}' was changed by someone else meanwhile; import again")
        return "added" if previous is None else "replaced"

    def _import_file(self, name: str, text: str, taken: dict[str, Path]) -> str:
        """Write ``text`` as ``<name>.yaml`` of the templates folder, unless another file of it
        defines ``name`` (``taken``: the folder's names, kept up to date here)."""
        from vmware_pilot.templates.saving import write_text

        target = self.templates_dir / f"{name}.yaml"
        self._refuse_size(target.name, text)
        other = taken.get(name)
        if other is not None and other != target:
            raise InvalidInput(
                f"Cannot save the template as '{name}': {other.name} already defines that name",
                field="name",
                hint=f"Choose another name, or remove or rename {self._shown(other)} first.",
            )
        previous = read_text(target) if (target.is_symlink() or target.exists()) else None
        if previous == text:
            return "unchanged"
        try:
            write_text(self.templates_dir, name, text)
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

        good, broken = self._load()
        out: list[tuple[str, str]] = []
        for tpl in good:
            row = tpl.name if self.rows is not None else None
            text = self._stored(tpl.name) if row is not None else read_text(tpl.path)
            if text is None:  # removed since it was listed
                continue
            checked = self._check(row or tpl.path.name, text, tpl.path, row=row).result  # as read now
            if not isinstance(checked, CustomTemplate):
                continue
            if literal_secrets(checked):
                text = template_text(masked_document(load_yaml(text)))
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
