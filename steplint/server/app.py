"""The language server: documents in, diagnostics and code actions out, one engine.

Every analysis runs on one engine thread, so the event loop keeps reading messages while a file
is linted, and results are computed once per (document version, settings generation, text): a
pull, a push and a code action on the same version share one lint.

Diagnostics are pushed (`textDocument/publishDiagnostics`, with the version) unless the client can
pull them and can be told to pull again (`workspace/diagnostic/refresh`): a client that pulls but
cannot be refreshed would keep stale diagnostics after a configuration change, so it gets pushes.
Changes are coalesced: a change is linted after a short settle time, and while the engine is busy
later changes only mark the document, which is linted once more, at its latest version, when the
engine is free; a result for a version the editor has left is never published.

Documents are linted with their project's context, as `steplint check FILE` lints them (project.py).
A module's new text reaches the project index when it is opened, saved or closed, and after the
typing settles: then the open documents whose project context changed are linted again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from steplint import __version__, cache
from steplint.config import CONFIG_NAMES, ConfigError
from steplint.diagnostic import Diagnostic
from steplint.engine import MAX_ANALYSED_CHARS, SYNTAX_ERROR, analysis_bound, collect_garbage_rarely, fix_source, lint_source, unanalysed_reason
from steplint.rule import all_rules, rule_text
from steplint.server.actions import FIX_ALL, NOTEBOOK_FIX_ALL, Change, diagnostic_actions, fix_all_action, other_cells, wanted, workspace_edit
from steplint.server.convert import lsp_diagnostics, position, whole_text_edit
from steplint.server.notebooks import OpenNotebook, cell_diagnostics, open_notebook
from steplint.server.notebooks import fix_all_changes as notebook_fix_all
from steplint.server.protocol import SteplintProtocol
from steplint.server.project import Projects, fingerprint
from steplint.server.settings import LOG_LEVELS, DocumentSettings, EditorSettings, editor_settings
from steplint.source import Source
from steplint.suppress import comments

log = logging.getLogger("steplint.server")

CHANGE_SETTLE_SECONDS = 0.01  # a keystroke can arrive as several changes (typing, auto-indent, a paste)
PROJECT_SETTLE_SECONDS = 0.5  # a typed module is summarised for its project when the typing pauses
CONFIG_FILE_NAMES = ("pyproject.toml",) + CONFIG_NAMES
PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass(frozen=True)
class Linted:
    key: Tuple[Any, ...]  # (document version, settings generation, hash of the text)
    diagnostics: List[types.Diagnostic]
    fixable: bool  # a fix applies under the current settings: fix-all has something to do
    found: Optional[List[Diagnostic]] = None  # the engine's diagnostics (fix-all's first round)
    project: Any = None  # the project context they were linted with
    by_cell: Optional[Dict[str, List[types.Diagnostic]]] = None  # a notebook's diagnostics, by cell URI
    notebook: Optional[OpenNotebook] = None  # the notebook's cells as linted
    unanalysed: Optional[str] = None  # why the engine did not analyse the text (its grammar is newer than this Python's)


class SteplintServer(LanguageServer):
    def __init__(self) -> None:
        python_cells = types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*")
        super().__init__(
            "steplint", __version__, protocol_cls=SteplintProtocol, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(notebook_selector=[python_cells], save=True),
        )
        self.editor = EditorSettings()
        self.documents: Optional[DocumentSettings] = None
        self.generation = 0
        self.pull = False  # the client pulls diagnostics; nothing is pushed
        self.engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steplint-engine")
        self.computed: Dict[Tuple[str, str], Tuple[Tuple[Any, ...], asyncio.Future]] = {}  # (kind, uri) -> (key, answer)
        self.pending: Dict[str, None] = {}  # documents to lint and publish, oldest first
        self.publisher: Optional[asyncio.Task] = None
        self.published_cells: Dict[str, List[str]] = {}  # notebook URI -> the cells last published
        self.reported: set = set()  # configuration errors already shown to the user
        self.too_large: set = set()  # documents the user was told are too large to analyse
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.projects: Optional[Projects] = None  # used on the engine thread only
        self.project_updates: Dict[str, asyncio.TimerHandle] = {}  # documents whose text the project awaits

    # -- capabilities the client announced ------------------------------------------------------

    def client_can(self, *path: str) -> Any:
        value: Any = self.client_capabilities
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                return None
        return value

    @property
    def versioned_edits(self) -> bool:
        return bool(self.client_can("workspace", "workspace_edit", "document_changes"))

    @property
    def lazy_actions(self) -> bool:
        return "edit" in (self.client_can("text_document", "code_action", "resolve_support", "properties") or ())

    # -- settings -------------------------------------------------------------------------------

    def apply_settings(self, editor: EditorSettings) -> None:
        """New editor settings or configuration files: a new generation, every document re-linted."""
        self.editor = editor
        self.generation += 1
        self.documents = DocumentSettings(editor, self.workspace.root_path)
        self.projects = Projects(self.excluded, self.summaries_cache)
        logging.getLogger("steplint").setLevel(LOG_LEVELS[editor.log_level])
        self.report_configuration_errors()

    def excluded(self, path: str) -> bool:
        try:
            return self.documents.settings_for(path).excluded(path)
        except ConfigError:
            return True  # a folder with a broken configuration of its own: not read for summaries

    def summaries_cache(self, path: str) -> Optional[str]:
        return cache.cache_dir(self.documents.settings_for(path))

    def report_configuration_errors(self) -> None:
        for error in self.documents.errors if self.documents else ():
            if error not in self.reported:
                self.reported.add(error)
                log.error("%s", error)
                self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"steplint: {error}"))

    def relint(self, uris: List[str]) -> None:
        """These open documents' diagnostics are out of date: push new ones, or have the client pull."""
        if self.pull:
            if uris and self.client_can("workspace", "diagnostics", "refresh_support"):
                self.workspace_diagnostic_refresh(None)
            return
        for uri in uris:
            self.schedule(uri, 0)

    # -- documents ------------------------------------------------------------------------------

    def open_document(self, uri: str):
        """The open document with this URI, however the client escaped it: pygls keys open
        documents by the unescaped URI (`file:///a%20b.py` is stored as `file:///a b.py`)."""
        return self.workspace.text_documents.get(unquote(uri))

    def open_uris(self) -> List[str]:
        """The open documents' URIs as the client spelled them, for publishing."""
        return [document.uri for document in list(self.workspace.text_documents.values())]

    def path_of(self, document) -> str:
        path = to_fs_path(document.uri)
        return path if path else os.path.join(self.documents.root, document.filename or "untitled.py")

    def is_python(self, document) -> bool:
        return document.language_id == "python" or (document.filename or "").endswith(PYTHON_SUFFIXES)

    def open_modules(self) -> Dict[str, Tuple[str, str]]:
        """Path -> (uri, text) of the open Python documents that are files: the project reads
        their texts, not the files'."""
        found = {}
        for document in list(self.workspace.text_documents.values()):
            path = to_fs_path(document.uri)
            if path and path.endswith(".py") and self.is_python(document) and len(document.source) <= MAX_ANALYSED_CHARS:
                found[path] = (document.uri, document.source)
        return found

    def snapshot(self, uri: str):
        """(document, text, key) of an open document's current text; None when it is not open."""
        document = self.open_document(uri)
        if document is None or self.documents is None:
            return None
        text = document.source
        return document, text, (document.version, self.generation, hash(text))

    def once(self, kind: str, uri: str, key, compute: Callable[[], Any]) -> "asyncio.Future":
        """The engine's answer for this document version and settings, computed once: a pull, a
        push and a code action on the same version share it."""
        cached = self.computed.get((kind, uri))
        if cached is not None and cached[0] == key:
            return cached[1]
        future = self.loop.run_in_executor(self.engine, compute)
        self.computed[(kind, uri)] = (key, future)
        return future

    def notebook_of(self, uri: str) -> Optional[types.NotebookDocument]:
        """The open notebook with this URI, or holding this cell."""
        return self.workspace.get_notebook_document(notebook_uri=uri) or self.workspace.get_notebook_document(cell_uri=uri)

    async def lint(self, uri: str) -> Optional[Linted]:
        """The diagnostics of the document's current text (of its notebook's, for a cell)."""
        notebook = self.notebook_of(uri)
        if notebook is not None:
            return await self.lint_notebook(notebook)
        found = self.snapshot(uri)
        if found is None:
            return None
        document, text, key = found
        if not self.is_python(document) or not self.editor.enable:
            return Linted(key, [], False)
        path = self.path_of(document)
        settings = self.documents.settings_for(path)
        self.report_configuration_errors()
        if to_fs_path(uri) and settings.excluded(path):
            return Linted(key, [], False)
        unanalysed = analysis_bound(text)  # (the command line's bound: size, and nesting that costs minutes)
        if unanalysed is not None:
            self.tell_not_analysed(document.uri, unanalysed)
            return Linted(key, [], False)
        units = self.workspace.position_codec.client_num_units
        project = self.project_context(path) if to_fs_path(uri) else None
        linted = await self.once("lint", uri, key, functools.partial(_lint, document.uri, path, text, key, settings, self.editor, units, project))
        if linted.unanalysed:
            self.tell_not_analysed(document.uri, linted.unanalysed)
        else:
            self.too_large.discard(document.uri)
        return linted

    def tell_not_analysed(self, uri: str, reason: str) -> None:
        """Once per document (until it can be analysed again): the command line's bound and words,
        as a warning in the editor's log."""
        if uri not in self.too_large:
            self.too_large.add(uri)
            log.warning("%s %s", uri, reason)

    def project_context(self, path: str) -> Callable[[], Any]:
        """What the project tells about the module, asked for on the engine thread."""
        projects, texts = self.projects, {p: text for p, (_, text) in self.open_modules().items()}
        return lambda: projects.context_for(path, texts) if path.endswith(".py") else None

    def notebook_path(self, notebook: types.NotebookDocument) -> str:
        return to_fs_path(notebook.uri) or os.path.join(self.documents.root, "untitled.ipynb")

    async def lint_notebook(self, notebook: types.NotebookDocument) -> Optional[Linted]:
        if self.documents is None:
            return None
        opened = open_notebook(notebook, self.open_document)
        key = (notebook.version, self.generation, hash(opened.book.source))
        path = self.notebook_path(notebook)
        settings = self.documents.settings_for(path)
        self.report_configuration_errors()
        if not self.editor.enable or (to_fs_path(notebook.uri) and settings.excluded(path)):
            return Linted(key, [], False, by_cell={cell.uri: [] for cell in opened.cells}, notebook=opened)
        units = self.workspace.position_codec.client_num_units
        return await self.once("lint", notebook.uri, key, functools.partial(_lint_notebook, path, opened, key, settings, self.editor, units))

    async def fix_all_changes(self, uri: str) -> Optional[List[Change]]:
        """The edits that `steplint check --fix` would make to the current text (None: nothing to fix)."""
        notebook = self.notebook_of(uri)
        if notebook is not None:
            linted = await self.lint_notebook(notebook)
            if linted is None or linted.notebook is None or linted.found is None:
                return None
            source = linted.notebook.book.source
            fix = functools.partial(fix_source, self.notebook_path(notebook), source, self.documents.settings_for(self.notebook_path(notebook)),
                                    self.editor.unsafe_fixes, diagnostics=linted.found)
            fixed = await self.once("fix", notebook.uri, linted.key, fix)
            if fixed.text == source:
                return None
            return notebook_fix_all(linted.notebook, fixed.text, self.workspace.position_codec.client_num_units)
        found = self.snapshot(uri)
        if found is None or not self.is_python(found[0]):
            return None
        linted = await self.lint(uri)
        document, text, key = found
        if linted is None or linted.key != key:
            return None  # the document changed meanwhile
        path = self.path_of(document)
        settings = self.documents.settings_for(path)
        fix = functools.partial(fix_source, path, text, settings, self.editor.unsafe_fixes, linted.project, diagnostics=linted.found)
        fixed = await self.once("fix", uri, key, fix)
        if fixed.text == text:
            return None
        return [(uri, document.version, [whole_text_edit(text, fixed.text, self.workspace.position_codec.client_num_units)])]

    def schedule(self, uri: str, delay: float) -> None:
        """Lint and publish the document (a cell's notebook) soon; the latest version wins."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        self.pending[notebook.uri if notebook is not None else uri] = None
        if self.publisher is None or self.publisher.done():
            self.publisher = asyncio.ensure_future(self._publish_pending(delay))

    async def _publish_pending(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        while self.pending:
            uri = next(iter(self.pending))
            del self.pending[uri]
            try:
                linted = await self.lint(uri)
            except Exception:  # the engine thread catches its own; this is the server's
                log.exception("cannot lint %s", uri)
                continue
            document = self.notebook_of(uri) or self.open_document(uri)
            if linted is None or document is None or linted.key[:2] != (document.version, self.generation):
                continue  # closed, or changed meanwhile: the newer version is pending
            if linted.by_cell is None:
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=linted.diagnostics, version=document.version))
                continue
            for gone in set(self.published_cells.get(uri, ())) - set(linted.by_cell):
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=gone, diagnostics=[]))
            self.published_cells[uri] = list(linted.by_cell)
            for cell_uri, diagnostics in linted.by_cell.items():
                cell = self.open_document(cell_uri)
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=diagnostics, version=cell.version if cell else None))

    def forget(self, uri: str) -> None:
        for kind in ("lint", "fix"):
            self.computed.pop((kind, uri), None)
        self.pending.pop(uri, None)

    def update_project(self, uri: str, delay: float) -> None:
        """Give the module's current text (its file's, once closed) to its project, after `delay`,
        then re-lint the open documents whose project context changed. Without delay the engine
        gets the update before any lint asked for later."""
        waiting = self.project_updates.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        path = to_fs_path(uri)
        if not path or not path.endswith(".py") or self.documents is None or self.excluded(path):
            return
        if delay:
            self.project_updates[uri] = self.loop.call_later(delay, self.update_project, uri, 0)
            return
        document = self.open_document(uri)
        modules = self.open_modules()
        texts = {p: text for p, (_, text) in modules.items()}
        # A text too large to analyse is not summarised either: the project reads the file, within its own bound.
        text = document.source if document is not None and len(document.source) <= MAX_ANALYSED_CHARS else None
        update = functools.partial(_changed_modules, self.projects, path, text, texts)
        asyncio.ensure_future(self._relint_changed(self.loop.run_in_executor(self.engine, update), modules))

    async def _relint_changed(self, update: "asyncio.Future", modules: Dict[str, Tuple[str, str]]) -> None:
        changed = await update
        uris = []
        for path, new_context in changed.items():
            if path not in modules:
                continue
            uri = modules[path][0]
            linted = self.computed.get(("lint", uri))
            # A lint asked for after the update (still running) or made with the new context stands.
            if linted is not None and (not linted[1].done() or fingerprint(linted[1].result().project) == new_context):
                continue
            self.computed.pop(("lint", uri), None)
            self.computed.pop(("fix", uri), None)
            uris.append(uri)
        self.relint(uris)


def _changed_modules(projects: Projects, path: str, text: Optional[str], open_texts: Dict[str, str]) -> Dict[str, Optional[str]]:
    """Runs on the engine thread: the open modules whose project context changed with `path`'s
    text, and the fingerprint of their new context."""
    try:
        return projects.changed(path, text, list(open_texts), open_texts)
    except Exception:
        log.exception("internal error while indexing %s; please report it", path)
        return {}


def _lint(uri: str, path: str, text: str, key, settings, editor: EditorSettings, units: Callable[[str], int], project: Callable[[], Any]) -> Linted:
    """Runs on the engine thread: diagnostics in LSP terms, with their fix and noqa edits."""
    started = time.perf_counter()
    try:
        context = _project_context(path, project)
        found = lint_source(path, text, settings, context)
        unanalysed = unanalysed_reason(path)  # (taken, so that the engine keeps none)
        shown = found if editor.show_syntax_errors else [d for d in found if d.code != SYNTAX_ERROR]
        source = Source(path, text)
        fixable = any(d.fix is not None and d.fix.applies(editor.unsafe_fixes) for d in shown)
        linted = Linted(key, lsp_diagnostics(source, shown, comments(source), key[0], editor.severity, units, uri), fixable, found, context,
                        unanalysed=unanalysed)
        log.debug("linted %s version %s: %d diagnostics in %.0f ms", path, key[0], len(found), 1000 * (time.perf_counter() - started))
        return linted
    except Exception:
        log.exception("internal error while linting %s; please report it", path)
        return Linted(key, [], False)


def _lint_notebook(path: str, opened: OpenNotebook, key, settings, editor: EditorSettings, units: Callable[[str], int]) -> Linted:
    """Runs on the engine thread: a notebook's diagnostics, by cell (no project context, as the
    command line checks notebooks)."""
    try:
        found = lint_source(path, opened.book.source, settings)
        shown = found if editor.show_syntax_errors else [d for d in found if d.code != SYNTAX_ERROR]
        fixable = any(d.fix is not None and d.fix.applies(editor.unsafe_fixes) for d in shown)
        return Linted(key, [], fixable, found, by_cell=cell_diagnostics(opened, shown, editor.severity, units), notebook=opened)
    except Exception:
        log.exception("internal error while linting %s; please report it", path)
        return Linted(key, [], False, by_cell={cell.uri: [] for cell in opened.cells}, notebook=opened)


def _project_context(path: str, project: Callable[[], Any]):
    """The module's project context; None (linted alone) when the project cannot be indexed."""
    try:
        return project()
    except Exception:
        log.exception("internal error while indexing the project of %s; linting it alone", path)
        return None


# -- handlers ---------------------------------------------------------------------------------


def guarded(empty: Callable[[Any], Any] = lambda params: None):
    """An internal error in one request or notification is logged and answered with an empty
    result (made from the request's params); the server goes on serving."""

    def wrap(handler):
        if asyncio.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def run_async(ls: SteplintServer, params):
                try:
                    return await handler(ls, params)
                except Exception:
                    log.exception("internal error in %s; please report it", handler.__name__)
                    return empty(params)

            return run_async

        @functools.wraps(handler)
        def run(ls: SteplintServer, params):
            try:
                return handler(ls, params)
            except Exception:
                log.exception("internal error in %s; please report it", handler.__name__)
                return empty(params)

        return run

    return wrap


@guarded()
def initialize(ls: SteplintServer, params: types.InitializeParams) -> None:
    ls.loop = asyncio.get_running_loop()
    ls.protocol.count_lines_as_lsp()
    _ClientLog.install(ls)
    editor, problems = editor_settings(params.initialization_options)
    ls.pull = bool(ls.client_can("text_document", "diagnostic") and ls.client_can("workspace", "diagnostics", "refresh_support"))
    if ls.pull:
        options = types.DiagnosticOptions(identifier="steplint", inter_file_dependencies=True, workspace_diagnostics=False)
        ls.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, options)(pull_diagnostics)
    ls.apply_settings(editor)
    for problem in problems:
        log.warning("%s", problem)


@guarded()
def initialized(ls: SteplintServer, params: types.InitializedParams) -> None:
    if ls.client_can("workspace", "did_change_watched_files", "dynamic_registration"):
        watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILE_NAMES]
        registration = types.Registration(
            id="steplint-configuration-files",
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        ls.client_register_capability(types.RegistrationParams(registrations=[registration]))


@guarded()
def did_open(ls: SteplintServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.update_project(uri, 0)  # first: the engine then lints it with its own summary in the index
    if not ls.pull:
        ls.schedule(uri, 0)


@guarded()
def did_change(ls: SteplintServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if not ls.pull:
        ls.schedule(uri, CHANGE_SETTLE_SECONDS)
    ls.update_project(uri, PROJECT_SETTLE_SECONDS)


@guarded()
def did_save(ls: SteplintServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if not ls.pull:
        ls.schedule(uri, 0)
    ls.update_project(uri, 0)


@guarded()
def did_close(ls: SteplintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.forget(uri)
    ls.update_project(uri, 0)  # the project reads the file again
    if not ls.pull:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@guarded()
def did_open_notebook(ls: SteplintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    if not ls.pull:
        ls.schedule(params.notebook_document.uri, 0)


@guarded()
def did_change_notebook(ls: SteplintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    if not ls.pull:
        ls.schedule(params.notebook_document.uri, CHANGE_SETTLE_SECONDS)


@guarded()
def did_save_notebook(ls: SteplintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    if not ls.pull:
        ls.schedule(params.notebook_document.uri, 0)


@guarded()
def did_close_notebook(ls: SteplintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    ls.forget(uri)
    published = ls.published_cells.pop(uri, [])
    if not ls.pull:
        for cell in published:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell, diagnostics=[]))


@guarded()
async def did_change_configuration(ls: SteplintServer, params: types.DidChangeConfigurationParams) -> None:
    sent = params.settings
    if not sent and ls.client_can("workspace", "configuration"):  # "settings changed, ask for them"
        answers = await ls.workspace_configuration_async(types.ConfigurationParams(items=[types.ConfigurationItem(section="steplint")]))
        sent = answers[0] if answers else None
    if sent is None:
        return  # nothing to go by: the settings stay
    editor, problems = editor_settings(sent)  # they replace the old ones: a removed setting is back to its default
    for problem in problems:
        log.warning("%s", problem)
    ls.apply_settings(editor)
    ls.relint(ls.open_uris())


@guarded()
def did_change_watched_files(ls: SteplintServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(change.uri.rsplit("/", 1)[-1] in CONFIG_FILE_NAMES for change in params.changes):
        log.info("configuration files changed; reloading them")
        ls.reported.clear()
        ls.apply_settings(ls.editor)
        ls.relint(ls.open_uris())


@guarded(lambda params: [])
async def code_action(ls: SteplintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
    uri = params.text_document.uri
    document = ls.open_document(uri)
    if document is None or not ls.editor.enable:
        return []
    only = params.context.only
    version, versioned, lazy = document.version, ls.versioned_edits, ls.lazy_actions
    actions = diagnostic_actions(uri, version, params.context.diagnostics, only, versioned, lazy)
    # A notebook's own fix-all kind only when asked for by name (else it would repeat source.fixAll).
    kinds = [FIX_ALL] + ([NOTEBOOK_FIX_ALL] if only and ls.notebook_of(uri) is not None else [])
    for kind in [k for k in kinds if ls.editor.fix_all and wanted(k, only)]:
        linted = await ls.lint(uri)
        if linted is not None and linted.fixable:
            if lazy:
                actions.append(fix_all_action(uri, version, None, versioned, kind))
            else:
                changes = await ls.fix_all_changes(uri)
                if changes:
                    actions.append(fix_all_action(uri, version, changes, versioned, kind))
    return actions


@guarded(lambda action: action)
async def resolve_code_action(ls: SteplintServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    uri, version = data.get("uri"), data.get("version")
    document = ls.open_document(uri) if uri else None
    if document is None or document.version != version:
        return action  # the document moved on: no edit rather than a misplaced one
    if data.get("fixAll"):
        changes = await ls.fix_all_changes(uri)
    else:
        changes = [(uri, version, data.get("edits") or [])] + other_cells(data)
    if changes and any(edits for _, _, edits in changes):
        action.edit = workspace_edit(changes, ls.versioned_edits)
    return action


@guarded(lambda params: types.RelatedFullDocumentDiagnosticReport(items=[]))
async def pull_diagnostics(ls: SteplintServer, params: types.DocumentDiagnosticParams):
    linted = await ls.lint(params.text_document.uri)
    if linted is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    result_id = "-".join(str(part) for part in linted.key)
    if params.previous_result_id == result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    items = linted.diagnostics if linted.by_cell is None else linted.by_cell.get(params.text_document.uri, [])
    return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=result_id)


@guarded()
def hover(ls: SteplintServer, params: types.HoverParams) -> Optional[types.Hover]:
    """On a steplint code of a `# noqa` directive: the rule's name and summary."""
    document = ls.open_document(params.text_document.uri)
    if document is None or not ls.editor.enable or not ls.is_python(document):
        return None
    row = params.position.line + 1
    source = Source(ls.path_of(document), document.source)
    if row > len(source.line_starts) or "noqa" not in source.line(row).lower():
        return None  # tokenized only for a line that names noqa
    directive = comments(source).noqa.get(row)
    offset = document.offset_at_position(params.position)
    if directive is None or not directive.start <= offset <= directive.end:
        return None
    for code in re.finditer(r"[A-Za-z]+[0-9]+", source.text[directive.start : directive.end]):
        start, end = directive.start + code.start(), directive.start + code.end()
        found = all_rules().get(code.group().upper())
        if found is not None and start <= offset <= end:
            text = f"**{found.code}** `{found.name}`: {found.summary}"
            span = types.Range(types.Position(**position(source, start, ls.workspace.position_codec.client_num_units)),
                               types.Position(**position(source, end, ls.workspace.position_codec.client_num_units)))
            return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text), range=span)
    return None


FIX_ALL_COMMAND = "steplint.fixAll"
SHOW_RULE_COMMAND = "steplint.showRule"


async def fix_all_command(ls: SteplintServer, *arguments: Any) -> None:
    """`steplint.fixAll` with the document's URI (a string, or `{"uri": ...}`): its fix-all, sent
    to the editor as `workspace/applyEdit`."""
    target = arguments[0] if arguments else None
    uri = target.get("uri") if isinstance(target, dict) else target
    if not isinstance(uri, str) or ls.open_document(uri) is None and ls.notebook_of(uri) is None:
        raise JsonRpcInvalidParams(f"{FIX_ALL_COMMAND}: expected the URI of an open document, got {target!r}")
    changes = await ls.fix_all_changes(uri) if ls.editor.enable else None
    if changes:
        edit = workspace_edit(changes, ls.versioned_edits)
        await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label="steplint: Fix all auto-fixable problems"))


def show_rule_command(ls: SteplintServer, *arguments: Any) -> str:
    """`steplint.showRule` with a rule code: its documentation in Markdown, as `steplint rule CODE` prints it."""
    found = all_rules().get(str(arguments[0]).upper()) if arguments else None
    if found is None:
        raise JsonRpcInvalidParams(f"{SHOW_RULE_COMMAND}: expected a rule code, got {list(arguments)!r}")
    return rule_text(found)


@guarded()
def shutdown(ls: SteplintServer, params: None) -> None:
    for waiting in ls.project_updates.values():
        waiting.cancel()
    ls.engine.shutdown(wait=False, cancel_futures=True)


class _ClientLog(logging.Handler):
    """steplint's log records as `window/logMessage`, sent from the event loop's thread."""

    TYPES = {logging.ERROR: types.MessageType.Error, logging.WARNING: types.MessageType.Warning, logging.INFO: types.MessageType.Info}

    def __init__(self, server: SteplintServer) -> None:
        super().__init__()
        self.server = server
        self.loop_thread = threading.get_ident()
        self.setFormatter(logging.Formatter("%(message)s"))

    @classmethod
    def install(cls, server: SteplintServer) -> None:
        logger = logging.getLogger("steplint")
        logger.handlers = [h for h in logger.handlers if not isinstance(h, cls)] + [cls(server)]

    def emit(self, record: logging.LogRecord) -> None:
        kind = self.TYPES.get(record.levelno, types.MessageType.Log if record.levelno < logging.INFO else types.MessageType.Error)
        params = types.LogMessageParams(type=kind, message=self.format(record))
        if threading.get_ident() == self.loop_thread:
            self.server.window_log_message(params)
        else:
            self.server.loop.call_soon_threadsafe(self.server.window_log_message, params)


def create_server() -> SteplintServer:
    server = SteplintServer()
    server.feature(types.INITIALIZE)(initialize)
    server.feature(types.INITIALIZED)(initialized)
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE)(did_save)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)(did_open_notebook)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)(did_change_notebook)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)(did_save_notebook)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)(did_close_notebook)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
    options = types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL], resolve_provider=True)
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(resolve_code_action)
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover)
    server.command(FIX_ALL_COMMAND)(fix_all_command)
    server.command(SHOW_RULE_COMMAND)(show_rule_command)
    server.feature(types.SHUTDOWN)(shutdown)
    return server


def serve() -> None:
    """Run the server over stdin/stdout until the client says exit."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="steplint server: %(levelname)s %(message)s")
    all_rules()  # load the rules now, not during the first keystroke's lint
    collect_garbage_rarely()
    create_server().start_io()
