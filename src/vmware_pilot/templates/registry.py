"""One registry for built-in and custom YAML templates: list, create, validate names, save.

Built-ins come first and cannot be shadowed: a YAML file reusing a built-in name is listed as
broken with a message to rename it. Custom files are looked at on every call (hot reload), but
each text is parsed and checked once per change: what was checked is kept by file name and the
SHA-256 of the text, and a listing only reads and hashes the texts (or, on PostgreSQL, asks the
database for their digests) to know which changed. A text that cannot be used is logged once,
when it is first seen, with its file, line and column.

Where the custom templates are kept is one ``kept.TextSource``: the folder's files
(``templates/folder.py``), or with ``rows`` (a database URL is set: several replicas may share
it) the database's rows, with the same checks, the same authorship rule and the same names
(``<name>.yaml``) in listings and messages; a change saved by another replica has another digest,
so it is seen at the next call. Saving, import and export are ``templates/keeping.py``'s.

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
from vmware_pilot.errors import TemplateError, excerpt
from vmware_pilot.kept import DatabaseTexts, TextSource
from vmware_pilot.results import TemplateInfo
from vmware_pilot.safety.gating import enforce
from vmware_pilot.templates.builtin import BUILTINS, BuiltinTemplate
from vmware_pilot.templates.custom import (
    BrokenFile,
    CustomTemplate,
    check_text,
    digest_of,
    excerpt_name,
)
from vmware_pilot.templates.discovery import builtin_entry, custom_entry
from vmware_pilot.templates.folder import TemplateFolder
from vmware_pilot.templates.keeping import TemplateKeeper
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
    entry: TemplateInfo | None = field(default=None)


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
        self.source: TextSource = (
            TemplateFolder(templates_dir)
            if rows is None
            else DatabaseTexts(
                rows.template_digests, rows.template_rows, rows.put_template, rows.delete_template
            )
        )
        self._builtins: dict[str, BuiltinTemplate[Any]] = {b.name: b for b in BUILTINS}
        # The built-ins' step counts for the catalog they were counted against: planning every
        # built-in again cost most of each list_workflows call.
        self._counted: tuple[Catalog, dict[str, int | None]] | None = None
        # What each custom text was found to be, by key (file name, or row name), with its digest;
        # the lock makes concurrent listings wait for one parse instead of each doing it.
        self._checked: dict[str, _Checked] = {}
        self._lock = threading.Lock()
        self.keeper = TemplateKeeper(self)

    @property
    def where(self) -> str:
        """Where custom templates are kept, for people: the folder, or the database."""
        return self.source.where

    @property
    def in_database(self) -> bool:
        return self.source.in_database

    def load(self) -> tuple[list[CustomTemplate], list[BrokenFile]]:
        """Every usable custom template (the first file wins a name) and every one that cannot be
        used, each text checked once per change (``_check``)."""
        checked = self._checked_texts()
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

    def _checked_texts(self) -> list[CustomTemplate | BrokenFile]:
        """The kept templates: their stamps are read on every call, a text only when its stamp is
        not the digest checked (it changed, another replica saved it, or this process never saw
        it); one that cannot be read is listed as broken."""
        stamps = self.source.stamps()
        with self._lock:
            stale = {k for k, s in stamps if (c := self._checked.get(k)) is None or c.digest != s}
        texts = self.source.read_many(stale) if stale else {}
        out: list[CustomTemplate | BrokenFile] = []
        for key, _ in stamps:
            path = self._path_of(key)
            if key not in stale:
                with self._lock:
                    known = self._checked.get(key)
                if known is not None:
                    out.append(known.result)
                    continue
            try:  # one text, or one forgotten meanwhile by another call
                text = texts[key] if key in texts else self.source.read(key)
            except TemplateError as exc:  # a link out of the folder, too large, not UTF-8: not parsed
                out.append(BrokenFile(path, path.stem, exc.message))
                continue
            if text is not None:  # else: removed between the two reads; not listed
                out.append(self.check(key, text, path).result)
        self._keep({k for k, _ in stamps})
        return out

    def check(self, key: str, text: str, path: Path) -> _Checked:
        """``text`` checked: as it was when its digest was last seen under ``key``, else parsed
        now (once, whoever else asks meanwhile). A text that cannot be used is logged once."""
        digest = digest_of(text)
        with self._lock:
            known = self._checked.get(key)
            if known is not None and known.digest == digest:
                return known
            result = check_text(text, path, self._builtins)
            row = key if self.in_database else None  # a row's text must name the row
            if row is not None and isinstance(result, CustomTemplate) and result.name != row:
                error = f"{path.name}: its text names the template '{excerpt_name(result.name)}'"
                result = BrokenFile(path, row, error)
            elif row is not None and isinstance(result, BrokenFile):
                result = BrokenFile(path, row, result.error)
            if isinstance(result, BrokenFile):
                _log.warning("custom template %s cannot be used: %s", self.shown(path), result.error)
            checked = _Checked(digest, result)
            if isinstance(result, CustomTemplate):
                checked.entry = custom_entry(result)
            self._checked[key] = checked
            return checked

    def _keep(self, keys: set[str]) -> None:
        """Forget what was checked for texts that are gone."""
        with self._lock:
            for key in [k for k in self._checked if k not in keys]:
                del self._checked[key]

    def key(self, name: str) -> str:
        """The key template ``name`` is kept under: its file name, or its row's name."""
        return name if self.in_database else f"{name}.yaml"

    def _path_of(self, key: str) -> Path:
        """The file a key names (stored ones are named ``<name>.yaml`` too)."""
        return Path(f"{key}.yaml") if self.in_database else self.templates_dir / key

    def path(self, name: str) -> Path:
        """The file of template ``name``."""
        return self._path_of(self.key(name))

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

    def shown(self, path: Path) -> str:
        """``~/<path relative to home>``, or the absolute path outside the home."""
        if self.in_database:
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

    def listing(self) -> list[TemplateInfo]:
        """Built-ins, then one entry per custom file sorted by file name (broken ones with ``error``).

        Each usable entry has ``parameters`` and an ``example`` call (``templates.discovery``).
        """
        counts = self._step_counts(self._current_catalog())
        out = [builtin_entry(b, counts[b.name]) for b in BUILTINS]
        good, broken = self.load()
        entries = [(t.path.name, self._entry(t)) for t in good]
        entries += [
            (b.path.name, TemplateInfo(name=b.name, file=b.path.name, type="custom", error=b.error))
            for b in broken
        ]
        out += [entry for _, entry in sorted(entries, key=lambda e: e[0])]
        return out

    def describe(self, name: str) -> TemplateInfo:
        """The ``listing`` entry of template ``name``; TemplateError (with the names) when unknown."""
        entry = next((e for e in self.listing() if e.name == name), None)
        if entry is None:
            raise TemplateError(
                f"Unknown template: {name}",
                hint="Call list_workflows() (or read pilot://templates) to see every template name.",
            )
        return entry

    def _entry(self, t: CustomTemplate) -> TemplateInfo:
        """The listing entry of ``t``, as built when its text was checked."""
        key = t.name if self.in_database else t.path.name
        with self._lock:
            known = self._checked.get(key)
        if known is not None and known.result is t and known.entry is not None:
            return known.entry
        return custom_entry(t)

    # --- creation ---------------------------------------------------------------------------
    def create(self, workflow_type: str, params: dict[str, Any], created_by: str) -> Workflow:
        """A new pending workflow from a template (nothing is stored here)."""
        catalog = self._current_catalog()
        builtin = self._builtins.get(workflow_type)
        if builtin is not None:
            plan = builtin.plan(params, self._facts(catalog))
            check_plan(plan.steps)  # built-ins pass the same plan rules as every other door
            return Workflow.new(workflow_type, WorkflowState.PENDING, plan.steps, plan.params, created_by)
        good, broken = self.load()
        custom = next((t for t in good if t.name == workflow_type), None)
        if custom is not None:
            return self._create_custom(custom, params, created_by, catalog)
        bad = next((b for b in broken if b.name == workflow_type), None)
        if bad is not None:
            raise TemplateError(
                f"Custom template '{workflow_type}' cannot be used: {bad.error}",
                hint=f"Fix {self.shown(bad.path)} (list_workflows shows the error), then try again.",
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
            source=self.shown(tpl.path),
        )
        return wf

    # --- saving -----------------------------------------------------------------------------

    def remove(self, name: str) -> bool:
        """Remove custom template ``name`` (False when there is none)."""
        if self.in_database:
            return self.source.delete(name)
        good, broken = self.load()
        paths = [t.path for t in good if t.name == name] + [b.path for b in broken if b.name == name]
        for path in paths:  # the file defining it, and any broken one that claims the name
            self.source.delete(path.name)
        return bool(paths)

    # --- saving, import and export (templates/keeping.py) --------------------------------------
    def validate_template_name(self, name: str) -> None:
        """``TemplateKeeper.validate_template_name``."""
        self.keeper.validate_template_name(name)

    @contextlib.contextmanager
    def saving(
        self, name: str, description: str, steps: Sequence[Step], authors: Sequence[str], caller: str
    ) -> Iterator[Path]:
        """``TemplateKeeper.saving``: write ``<name>.yaml``; take it back when the block raises."""
        with self.keeper.saving(name, description, steps, authors, caller) as path:
            yield path

    def save_as_template(
        self, name: str, description: str, steps: Sequence[Step], authors: list[str], *, caller: str
    ) -> Path:
        """Write ``<templates_dir>/<name>.yaml`` (see ``saving``) and return its path."""
        with self.saving(name, description, steps, authors, caller) as path:
            return path

    def import_folder(self, folder: Path, by: str) -> list[dict[str, Any]]:
        return self.keeper.import_folder(folder, by)

    def export_texts(self) -> tuple[list[tuple[str, str]], list[BrokenFile]]:
        return self.keeper.export_texts()
