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
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from steplint import __version__
from steplint.config import CONFIG_NAMES
from steplint.engine import SYNTAX_ERROR, UNUSED_NOQA, fix_source, lint_source
from steplint.rule import all_rules
from steplint.server.actions import FIX_ALL, diagnostic_actions, fix_all_action, wanted, workspace_edit
from steplint.server.convert import lsp_diagnostics, whole_text_edit
from steplint.server.settings import LOG_LEVELS, DocumentSettings, EditorSettings, editor_settings
from steplint.source import Source
from steplint.suppress import Comments, comments

log = logging.getLogger("steplint.server")

CHANGE_SETTLE_SECONDS = 0.05  # a keystroke can arrive as several changes (typing, auto-indent, a paste)
CONFIG_FILE_NAMES = ("pyproject.toml",) + CONFIG_NAMES
PYTHON_SUFFIXES = (".py", ".pyi")
_NO_COMMENTS = Comments({}, False, frozenset())


@dataclass(frozen=True)
class Linted:
    key: Tuple[Any, ...]  # (document version, settings generation, hash of the text)
    diagnostics: List[types.Diagnostic]
    fixable: bool  # a fix applies under the current settings: fix-all has something to do


class SteplintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("steplint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.editor = EditorSettings()
        self.documents: Optional[DocumentSettings] = None
        self.generation = 0
        self.pull = False  # the client pulls diagnostics; nothing is pushed
        self.engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steplint-engine")
        self.computed: Dict[Tuple[str, str], Tuple[Tuple[Any, ...], asyncio.Future]] = {}  # (kind, uri) -> (key, answer)
        self.pending: Dict[str, None] = {}  # documents to lint and publish, oldest first
        self.publisher: Optional[asyncio.Task] = None
        self.reported: set = set()  # configuration errors already shown to the user
        self.loop: Optional[asyncio.AbstractEventLoop] = None

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
        logging.getLogger("steplint").setLevel(LOG_LEVELS[editor.log_level])
        self.report_configuration_errors()

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
        return self.workspace.text_documents.get(uri)

    def path_of(self, document) -> str:
        path = to_fs_path(document.uri)
        return path if path else os.path.join(self.documents.root, document.filename or "untitled.py")

    def is_python(self, document) -> bool:
        return document.language_id == "python" or (document.filename or "").endswith(PYTHON_SUFFIXES)

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

    async def lint(self, uri: str) -> Optional[Linted]:
        """The diagnostics of the document's current text."""
        found = self.snapshot(uri)
        if found is None:
            return None
        document, text, key = found
        if not self.is_python(document):
            return Linted(key, [], False)
        path = self.path_of(document)
        settings = self.documents.settings_for(path)
        self.report_configuration_errors()
        if to_fs_path(uri) and settings.excluded(path):
            return Linted(key, [], False)
        units = self.workspace.position_codec.client_num_units
        return await self.once("lint", uri, key, functools.partial(_lint, path, text, key, settings, self.editor, units))

    async def fix_all_edits(self, uri: str) -> Optional[List[Dict[str, Any]]]:
        """The edit that `steplint check --fix` would make to the current text (None: nothing to fix)."""
        found = self.snapshot(uri)
        if found is None or not self.is_python(found[0]):
            return None
        document, text, key = found
        path = self.path_of(document)
        settings = self.documents.settings_for(path)
        fixed = await self.once("fix", uri, key, functools.partial(fix_source, path, text, settings, self.editor.unsafe_fixes))
        if fixed.text == text:
            return None
        return [whole_text_edit(text, fixed.text, self.workspace.position_codec.client_num_units)]

    def schedule(self, uri: str, delay: float) -> None:
        """Lint and publish the document soon; the latest version wins."""
        self.pending[uri] = None
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
            document = self.open_document(uri)
            if linted is None or document is None or linted.key[:2] != (document.version, self.generation):
                continue  # closed, or changed meanwhile: the newer version is pending
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=linted.diagnostics, version=document.version))

    def forget(self, uri: str) -> None:
        for kind in ("lint", "fix"):
            self.computed.pop((kind, uri), None)
        self.pending.pop(uri, None)

    def republish_dependents(self, changed_uri: str) -> None:
        """A module was saved: re-lint the open documents whose diagnostics may depend on it.

        The project index (who imports whom) is where "may depend" becomes precise; until the
        engine reads other modules, this is every other open Python document."""
        dependents = [uri for uri, d in self.workspace.text_documents.items() if uri != changed_uri and self.is_python(d)]
        for uri in dependents:
            self.computed.pop(("lint", uri), None)
        self.relint(dependents)


def _lint(path: str, text: str, key, settings, editor: EditorSettings, units: Callable[[str], int]) -> Linted:
    """Runs on the engine thread: diagnostics in LSP terms, with their fix and noqa edits."""
    started = time.perf_counter()
    try:
        found = lint_source(path, text, settings)
        if not editor.show_syntax_errors:
            found = [d for d in found if d.code != SYNTAX_ERROR]
        source = Source(path, text)
        noqa_comments = comments(source) if any(d.code not in (SYNTAX_ERROR, UNUSED_NOQA) for d in found) else _NO_COMMENTS
        fixable = any(d.fix is not None and d.fix.applies(editor.unsafe_fixes) for d in found)
        linted = Linted(key, lsp_diagnostics(source, found, noqa_comments, key[0], editor.severity, units), fixable)
        log.debug("linted %s version %s: %d diagnostics in %.0f ms", path, key[0], len(found), 1000 * (time.perf_counter() - started))
        return linted
    except Exception:
        log.exception("internal error while linting %s; please report it", path)
        return Linted(key, [], False)


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
    if not ls.pull:
        ls.schedule(params.text_document.uri, 0)


@guarded()
def did_change(ls: SteplintServer, params: types.DidChangeTextDocumentParams) -> None:
    if not ls.pull:
        ls.schedule(params.text_document.uri, CHANGE_SETTLE_SECONDS)


@guarded()
def did_save(ls: SteplintServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if not ls.pull:
        ls.schedule(uri, 0)
    if uri.endswith(PYTHON_SUFFIXES):
        ls.republish_dependents(uri)


@guarded()
def did_close(ls: SteplintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.forget(uri)
    if not ls.pull:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@guarded()
async def did_change_configuration(ls: SteplintServer, params: types.DidChangeConfigurationParams) -> None:
    sent = params.settings
    if not sent and ls.client_can("workspace", "configuration"):  # "settings changed, ask for them"
        answers = await ls.workspace_configuration_async(types.ConfigurationParams(items=[types.ConfigurationItem(section="steplint")]))
        sent = answers[0] if answers else None
    editor, problems = editor_settings(sent, ls.editor)
    for problem in problems:
        log.warning("%s", problem)
    ls.apply_settings(editor)
    ls.relint(list(ls.workspace.text_documents))


@guarded()
def did_change_watched_files(ls: SteplintServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(change.uri.rsplit("/", 1)[-1] in CONFIG_FILE_NAMES for change in params.changes):
        log.info("configuration files changed; reloading them")
        ls.reported.clear()
        ls.apply_settings(ls.editor)
        ls.relint(list(ls.workspace.text_documents))


@guarded(lambda params: [])
async def code_action(ls: SteplintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
    uri = params.text_document.uri
    document = ls.open_document(uri)
    if document is None:
        return []
    only = params.context.only
    version, versioned, lazy = document.version, ls.versioned_edits, ls.lazy_actions
    actions = diagnostic_actions(uri, version, params.context.diagnostics, only, versioned, lazy)
    if ls.editor.fix_all and wanted(FIX_ALL, only):
        linted = await ls.lint(uri)
        if linted is not None and linted.fixable:
            if lazy:
                actions.append(fix_all_action(uri, version, None, versioned))
            else:
                edits = await ls.fix_all_edits(uri)
                if edits:
                    actions.append(fix_all_action(uri, version, edits, versioned))
    return actions


@guarded(lambda action: action)
async def resolve_code_action(ls: SteplintServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    uri, version = data.get("uri"), data.get("version")
    document = ls.open_document(uri) if uri else None
    if document is None or document.version != version:
        return action  # the document moved on: no edit rather than a misplaced one
    edits = await ls.fix_all_edits(uri) if data.get("fixAll") else data.get("edits")
    if edits:
        action.edit = workspace_edit(uri, version, edits, ls.versioned_edits)
    return action


@guarded(lambda params: types.RelatedFullDocumentDiagnosticReport(items=[]))
async def pull_diagnostics(ls: SteplintServer, params: types.DocumentDiagnosticParams):
    linted = await ls.lint(params.text_document.uri)
    if linted is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    result_id = "-".join(str(part) for part in linted.key)
    if params.previous_result_id == result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return types.RelatedFullDocumentDiagnosticReport(items=linted.diagnostics, result_id=result_id)


@guarded()
def shutdown(ls: SteplintServer, params: None) -> None:
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
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
    options = types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True)
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(resolve_code_action)
    server.feature(types.SHUTDOWN)(shutdown)
    return server


def serve() -> None:
    """Run the server over stdin/stdout until the client says exit."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="steplint server: %(levelname)s %(message)s")
    all_rules()  # load the rules now, not during the first keystroke's lint
    create_server().start_io()
