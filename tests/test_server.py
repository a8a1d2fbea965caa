"""`steplint server` end to end: the real console script over stdio, driven by pytest-lsp's client
with the capabilities VS Code and Neovim send (and VS Code's newer pull-diagnostics ones)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from pygls.protocol import default_converter

from steplint.config import Settings
from steplint.engine import fix_source

pytestmark = pytest.mark.asyncio

# An AMP loop whose scheduler advances even when GradScaler skipped the update: SL101.
TRAINING = textwrap.dedent(
    '''\
    import torch

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    scaler = torch.amp.GradScaler("cpu")

    for inputs in torch.randn(20, 8, 4):
        optimizer.zero_grad()
        loss = model(inputs).square().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    '''
)
SCHEDULER_ROW = 13  # 0-based line of `scheduler.step()`
# An update counter that ends the run, counting skipped updates too: SL102, whose fix is unsafe
# (gating it makes the run longer by the skipped updates).
WITH_COUNTER = TRAINING.replace("\nfor inputs", "\nupdates = 0\nfor inputs") + "    updates += 1\n    if updates >= 1000:\n        break\n"
WAIT = 60  # seconds; generous for a machine shared by many sessions, never a latency assertion


def vscode_with_pull() -> types.ClientCapabilities:
    """VS Code's capabilities as its current versions send them: it pulls diagnostics and can be
    told to pull again."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(dynamic_registration=True, related_document_support=False)
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


CLIENTS = {
    "visual-studio-code": lambda: client_capabilities("visual-studio-code"),
    "neovim": lambda: client_capabilities("neovim"),
    "visual-studio-code-pull": vscode_with_pull,
}


def recording_client() -> LanguageClient:
    """pytest-lsp's client, also keeping each publishDiagnostics' version, each registration and
    each edit the server asked it to apply."""
    client = LanguageClient(converter_factory=default_converter)
    client.published = []
    client.registrations = []
    client.applied = []  # workspace/applyEdit requests the server sent
    features = dict(DEFAULT_CLIENT_FEATURES)
    record_default = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams):
        record_default(client, params)
        client.published.append(params)

    def register(client: LanguageClient, params: types.RegistrationParams):
        client.registrations.extend(params.registrations)

    def apply_edit(client: LanguageClient, params: types.ApplyWorkspaceEditParams):
        client.applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    features[types.CLIENT_REGISTER_CAPABILITY] = register
    features[types.WORKSPACE_APPLY_EDIT] = apply_edit
    register_lsp_features(client, features)
    return client


# The console script users run; the alias `lsp` through `python -m steplint` below.
SERVER = ClientServerConfig(server_command=[str(Path(sys.executable).with_name("steplint")), "server"], client_factory=recording_client)
ALIAS = ClientServerConfig(server_command=[sys.executable, "-m", "steplint", "lsp"], client_factory=recording_client)


class Editor:
    """What an editor does with the server: open, change, ask for diagnostics and actions, apply."""

    def __init__(self, client: LanguageClient, root: Path, kind: str) -> None:
        self.client = client
        self.root = root
        self.kind = kind
        self.texts: Dict[str, str] = {}
        self.versions: Dict[str, int] = {}
        self.encoding = "utf-16"

    @property
    def pull(self) -> bool:
        return self.client.initialize_result.capabilities.diagnostic_provider is not None

    def uri(self, name: str) -> str:
        return (self.root / name).as_uri()

    def open(self, name: str, text: str) -> str:
        uri = self.uri(name)
        self.texts[uri], self.versions[uri] = text, 1
        item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
        return uri

    def change(self, uri: str, text: str) -> None:
        self.texts[uri] = text
        self.versions[uri] += 1
        document = types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri])
        change = types.TextDocumentContentChangeWholeDocument(text=text)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(text_document=document, content_changes=[change]))

    async def diagnostics(self, uri: str) -> List[types.Diagnostic]:
        """The diagnostics of the document's current version: pulled, or the push for that version."""
        if self.pull:
            params = types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
            report = await asyncio.wait_for(self.client.text_document_diagnostic_async(params), WAIT)
            return list(report.items)
        version = self.versions[uri]
        for _ in range(WAIT * 100):
            for published in reversed(self.client.published):
                if published.uri == uri and published.version == version:
                    return list(published.diagnostics)
            await asyncio.sleep(0.01)
        raise AssertionError(f"no diagnostics published for {uri} version {version}")

    async def actions(self, uri: str, diagnostics: List[types.Diagnostic], only: Optional[List[str]] = None) -> List[types.CodeAction]:
        rows = [d.range.start.line for d in diagnostics] or [0]
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(min(rows), 0), types.Position(max(rows) + 1, 0)),
            context=types.CodeActionContext(diagnostics=diagnostics, only=only),
        )
        actions = await asyncio.wait_for(self.client.text_document_code_action_async(params), WAIT)
        return [a for a in actions or [] if isinstance(a, types.CodeAction)]

    async def apply(self, uri: str, action: types.CodeAction) -> str:
        """Resolve the action if the server left its edit for later, apply it, send the change."""
        if action.edit is None:
            action = await asyncio.wait_for(self.client.code_action_resolve_async(action), WAIT)
        edit = action.edit
        if edit.document_changes:
            (change,) = edit.document_changes
            assert change.text_document.version == self.versions[uri]
            edits = change.edits
        else:
            edits = edit.changes[uri]
        new = apply_text_edits(self.texts[uri], edits, self.encoding)
        self.change(uri, new)
        return new


UNITS = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}


def apply_text_edits(text: str, edits, encoding: str) -> str:
    """The client's side: LSP positions (in the agreed encoding) to offsets, then the edits."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    codec, unit = UNITS[encoding]

    def offset(position: types.Position) -> int:
        if position.line >= len(starts):
            return len(text)
        line_start = starts[position.line]
        units = 0
        index = line_start
        while units < position.character:
            units += len(text[index].encode(codec)) // unit
            index += 1
        return index

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


@pytest_lsp.fixture(config=SERVER, params=list(CLIENTS))
async def client(request, lsp_client: LanguageClient, tmp_path: Path):
    params = types.InitializeParams(capabilities=CLIENTS[request.param](), root_uri=tmp_path.as_uri())
    lsp_client.initialize_result = await lsp_client.initialize_session(params)
    lsp_client.kind, lsp_client.root = request.param, tmp_path
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def editor(client: LanguageClient) -> Editor:
    found = Editor(client, client.root, client.kind)
    found.encoding = client.initialize_result.capabilities.position_encoding or "utf-16"
    return found


@pytest_lsp.fixture(config=ALIAS)
async def client_with_options(lsp_client: LanguageClient, tmp_path: Path):
    """Neovim's way to pass settings: `init_options = { settings = { ... } }`."""
    options = {"settings": {"select": ["SL1"], "fixAll": False, "severity": "hint", "logLevel": "debug", "showSyntaxErrors": "no", "ignore": ["SL9"]}}
    params = types.InitializeParams(capabilities=client_capabilities("neovim"), root_uri=tmp_path.as_uri(), initialization_options=options)
    lsp_client.initialize_result = await lsp_client.initialize_session(params)
    lsp_client.kind, lsp_client.root = "neovim", tmp_path
    yield
    await lsp_client.shutdown_session()


def codes(diagnostics) -> List[str]:
    return sorted(str(d.code) for d in diagnostics)


async def test_quick_fix_clears_the_diagnostic(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.code == "SL101" and diagnostic.source == "steplint"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.code_description is None  # no hosted docs: no link that would lead nowhere
    assert diagnostic.range.start == types.Position(SCHEDULER_ROW, 4)
    assert editor.pull == (editor.kind == "visual-studio-code-pull")

    actions = await editor.actions(uri, [diagnostic])
    titles = [a.title for a in actions]
    fix = next(a for a in actions if a.title.startswith("steplint (SL101): ") and "Disable" not in a.title)
    assert fix.is_preferred and fix.kind == types.CodeActionKind.QuickFix
    assert "steplint (SL101): Disable for this line" in titles
    fixed = await editor.apply(uri, fix)
    assert "if committed:\n        scheduler.step()" in fixed
    assert await editor.diagnostics(uri) == []


async def test_fix_all_makes_what_check_fix_makes(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    diagnostics = await editor.diagnostics(uri)
    actions = await editor.actions(uri, diagnostics, only=[types.CodeActionKind.SourceFixAll])
    (fix_all,) = actions  # the `only` filter leaves out the quick fixes
    assert fix_all.kind == "source.fixAll.steplint"
    fixed = await editor.apply(uri, fix_all)
    assert fixed == fix_source(str(editor.root / "train.py"), TRAINING, Settings()).text != TRAINING
    assert await editor.diagnostics(uri) == []
    assert await editor.actions(uri, [], only=[types.CodeActionKind.SourceFixAll]) == []


async def test_disable_for_this_line_adds_and_extends_noqa(editor: Editor):
    text = TRAINING.replace("    scheduler.step()\n", "    scheduler.step()  # noqa: E501\n")
    uri = editor.open("train.py", text)
    (diagnostic,) = await editor.diagnostics(uri)
    actions = await editor.actions(uri, [diagnostic], only=[types.CodeActionKind.QuickFix])
    (noqa,) = [a for a in actions if a.title == "steplint (SL101): Disable for this line"]
    assert not noqa.is_preferred
    fixed = await editor.apply(uri, noqa)
    assert fixed.splitlines()[SCHEDULER_ROW] == "    scheduler.step()  # noqa: E501, SL101"
    assert await editor.diagnostics(uri) == []

    plain = editor.open("plain.py", TRAINING)
    (diagnostic,) = await editor.diagnostics(plain)
    (noqa,) = [a for a in await editor.actions(plain, [diagnostic]) if "Disable" in a.title]
    assert (await editor.apply(plain, noqa)).splitlines()[SCHEDULER_ROW] == "    scheduler.step()  # noqa: SL101"


async def test_configuration_change_applies_at_once(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]
    before = len(editor.client.published), editor.client.diagnostic_refresh_count
    settings = {"steplint": {"ignore": ["SL101"], "severity": "error"}}
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))
    if editor.pull:
        for _ in range(WAIT * 100):
            if editor.client.diagnostic_refresh_count > before[1]:
                break
            await asyncio.sleep(0.01)
        assert editor.client.diagnostic_refresh_count > before[1]
        assert await editor.diagnostics(uri) == []
    else:
        for _ in range(WAIT * 100):
            if len(editor.client.published) > before[0]:
                break
            await asyncio.sleep(0.01)
        assert editor.client.published[-1].uri == uri and list(editor.client.published[-1].diagnostics) == []

    # New settings replace the old ones: `ignore`, left out now, no longer applies.
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"steplint": {"severity": "error"}}))
    editor.change(uri, TRAINING)  # a new version, so the push or pull below is the new settings'
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.code == "SL101" and diagnostic.severity == types.DiagnosticSeverity.Error


async def test_project_configuration_is_read_and_reloaded(editor: Editor):
    pyproject = editor.root / "pyproject.toml"
    pyproject.write_text('[tool.steplint]\nignore = ["SL101"]\n')
    editor.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Created)])
    )
    uri = editor.open("train.py", TRAINING)
    assert await editor.diagnostics(uri) == []
    if editor.kind.startswith("visual-studio-code"):  # it registers watchers dynamically; Neovim cannot
        (registration,) = editor.client.registrations
        assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        patterns = {w["globPattern"] for w in registration.register_options["watchers"]}
        assert {"**/pyproject.toml", "**/steplint.toml"} <= patterns
    else:
        assert editor.client.registrations == []

    pyproject.write_text('[tool.steplint]\nselect = ["SL1"]\n')
    editor.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)])
    )
    editor.change(uri, TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]

    pyproject.write_text('[tool.steplint]\nselect = ["SL999"]\n')  # broken: the user is told, the defaults apply
    editor.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)])
    )
    editor.change(uri, TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]
    assert any("SL999" in m.message for m in editor.client.messages)


async def test_syntax_error_while_typing(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]
    half_typed = TRAINING.replace("    scheduler.step()\n", "    scheduler.step(\n")
    editor.change(uri, half_typed)
    (error,) = await editor.diagnostics(uri)
    assert error.code == "SL001" and error.severity == types.DiagnosticSeverity.Error
    assert error.range.start.line >= SCHEDULER_ROW
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"showSyntaxErrors": False}))
    editor.change(uri, half_typed)
    assert await editor.diagnostics(uri) == []
    editor.change(uri, TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]


@pytest.mark.parametrize("client", ["visual-studio-code", "neovim"], indirect=True)
async def test_two_documents_and_closing_one(editor: Editor):
    first = editor.open("train.py", TRAINING)
    second = editor.open("finetune.py", TRAINING.replace("scheduler =", "lr_schedule =").replace("scheduler.step", "lr_schedule.step"))
    assert codes(await editor.diagnostics(first)) == ["SL101"]
    (other,) = await editor.diagnostics(second)
    assert other.code == "SL101" and "lr_schedule" in other.message
    editor.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=second)))
    editor.change(first, TRAINING + "\n")
    assert codes(await editor.diagnostics(first)) == ["SL101"]
    if not editor.pull:
        assert list([p for p in editor.client.published if p.uri == second][-1].diagnostics) == []


UTILS = textwrap.dedent(
    '''\
    import torch


    def save_checkpoint(path, model, optimizer, scaler):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    '''
)
# The saver gains the scaler's state: the checkpoint of train.py is then complete.
UTILS_WITH_SCALER = UTILS.replace("optimizer.state_dict()}", "optimizer.state_dict(), \"scaler\": scaler.state_dict()}")
TRAIN_WITH_UTILS = textwrap.dedent(
    '''\
    import torch

    from utils import save_checkpoint


    def main(model, loader):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler("cpu")
        for batch in loader:
            scaler.scale(model(batch).mean()).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        save_checkpoint("last.pt", model, optimizer, scaler)


    def warm_start(model, path):
        """The script can resume: its checkpoints are read back."""
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        optimizer.load_state_dict(torch.load(path)["optimizer"])
        return optimizer
    '''
)


async def changed_diagnostics(editor: Editor, uri: str, old: List[str]) -> List[str]:
    """The document's diagnostic codes once they differ from `old` (its version unchanged: another
    module changed), pushed anew or pulled again."""
    for _ in range(WAIT * 20):
        if editor.pull:
            found = codes(await editor.diagnostics(uri))
        else:
            found = codes(next(p.diagnostics for p in reversed(editor.client.published) if p.uri == uri))
        if found != old:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"the diagnostics of {uri} stayed {old}")


async def test_a_change_in_utils_relints_the_open_modules_that_use_it(editor: Editor):
    (editor.root / "utils.py").write_text(UTILS)
    (editor.root / "train.py").write_text(TRAIN_WITH_UTILS)
    train = editor.open("train.py", TRAIN_WITH_UTILS)
    # As `steplint check train.py` says: the helper's checkpoint omits the scaler train.py has.
    (saver,) = await editor.diagnostics(train)
    assert saver.code == "SL302" and "utils.py:4" in saver.message and "`scaler`" in saver.message
    utils = editor.open("utils.py", UTILS)
    unrelated = editor.open("unrelated.py", TRAINING)
    assert codes(await editor.diagnostics(utils)) == []
    assert codes(await editor.diagnostics(unrelated)) == ["SL101"]
    unrelated_pushes = [p.uri for p in editor.client.published].count(unrelated)

    editor.change(utils, UTILS_WITH_SCALER)  # typed, not saved: the open text is what counts
    assert await changed_diagnostics(editor, train, ["SL302"]) == []
    if not editor.pull:  # the module that does not use utils.py was not linted again
        barrier = editor.open("barrier.py", TRAINING)  # published after anything scheduled before it
        await editor.diagnostics(barrier)
        assert [p.uri for p in editor.client.published].count(unrelated) == unrelated_pushes

    editor.change(utils, UTILS)
    editor.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=utils)))
    assert await changed_diagnostics(editor, train, []) == ["SL302"]

    editor.change(utils, UTILS_WITH_SCALER)
    assert await changed_diagnostics(editor, train, ["SL302"]) == []
    # Closed without saving: the project reads utils.py from disk again.
    editor.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=utils)))
    assert await changed_diagnostics(editor, train, []) == ["SL302"]


async def test_rapid_changes_publish_the_latest_version(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    await editor.diagnostics(uri)
    for i in range(10):  # typing: many versions, the last one fixed by hand
        editor.change(uri, TRAINING.replace("scheduler.step()", "scheduler.step()" + " " * i))
    gated = TRAINING.replace("scaler.step(optimizer)\n", "committed = scaler.step(optimizer)\n").replace(
        "    scheduler.step()\n", "    if committed:\n        scheduler.step()\n"
    )
    editor.change(uri, gated)
    diagnostics = await editor.diagnostics(uri)
    assert "SL101" not in codes(diagnostics)
    if not editor.pull:  # no push for a version the editor had already left
        versions = [p.version for p in editor.client.published if p.uri == uri]
        assert versions == sorted(versions) and versions[-1] == editor.versions[uri]


@pytest.mark.parametrize("client", ["visual-studio-code"], indirect=True)  # nothing here depends on the client
async def test_odd_documents_and_internal_errors_do_not_stop_the_server(editor: Editor):
    binaryish = editor.open("blob.py", "scaler.step(opt)\n\x00\x01\x02\ufffd" * 2000)
    assert codes(await editor.diagnostics(binaryish)) in ([], ["SL001"])
    huge = editor.open("huge.py", "x = 1\n" * 200_000)
    assert await editor.diagnostics(huge) == []
    not_python = editor.uri("notes.txt")
    item = types.TextDocumentItem(uri=not_python, language_id="plaintext", version=1, text="scaler.step(opt)\n")
    editor.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))

    uri = editor.open("train.py", TRAINING)
    (diagnostic,) = await editor.diagnostics(uri)
    broken = types.CodeAction(title="steplint (SL101): broken", data={"uri": uri, "version": 1, "edits": "not edits"})
    answer = await asyncio.wait_for(editor.client.code_action_resolve_async(broken), WAIT)
    assert answer.edit is None
    assert any(m.type == types.MessageType.Error and "internal error" in m.message for m in editor.client.log_messages)
    actions = await editor.actions(uri, [diagnostic])  # still serving
    assert any(a.title.startswith("steplint (SL101)") for a in actions)


@pytest.mark.parametrize("client", ["visual-studio-code", "neovim"], indirect=True)
async def test_shutdown_and_exit(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    await editor.diagnostics(uri)
    await editor.client.shutdown_session()
    assert editor.client._server.returncode == 0
    editor.client.capabilities = None  # shut down already: the fixture has nothing left to do


async def test_initialization_options(client_with_options: LanguageClient):
    editor = Editor(client_with_options, client_with_options.root, "neovim")
    editor.encoding = client_with_options.initialize_result.capabilities.position_encoding
    uri = editor.open("train.py", TRAINING)
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.code == "SL101" and diagnostic.severity == types.DiagnosticSeverity.Hint
    assert await editor.actions(uri, [diagnostic], only=["source"]) == []  # fixAll: false
    assert len(await editor.actions(uri, [diagnostic])) == 2  # the quick fix and the noqa stay
    warnings = [m.message for m in editor.client.log_messages if m.type == types.MessageType.Warning]
    assert sorted(warnings) == [
        "editor settings: ignore: unknown rule code or prefix 'SL9'",
        "setting showSyntaxErrors: expected true or false, got 'no'",
    ]


@pytest.mark.parametrize("client", ["visual-studio-code", "neovim"], indirect=True)
async def test_unsafe_fixes_one_at_a_time_and_in_fix_all_only_when_asked(editor: Editor):
    uri = editor.open("train.py", WITH_COUNTER)
    diagnostics = await editor.diagnostics(uri)
    assert codes(diagnostics) == ["SL101", "SL102"]
    counter = next(d for d in diagnostics if d.code == "SL102")
    (unsafe,) = [a for a in await editor.actions(uri, [counter], only=["quickfix"]) if "Disable" not in a.title]
    assert unsafe.title.startswith("steplint (SL102): ") and not unsafe.is_preferred

    path = str(editor.root / "train.py")
    (fix_all,) = await editor.actions(uri, diagnostics, only=["source.fixAll"])
    assert await editor.apply(uri, fix_all) == fix_source(path, WITH_COUNTER, Settings()).text
    assert codes(await editor.diagnostics(uri)) == ["SL102"]

    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"steplint": {"unsafeFixes": True}}))
    editor.change(uri, WITH_COUNTER)
    diagnostics = await editor.diagnostics(uri)
    (fix_all,) = await editor.actions(uri, diagnostics, only=["source.fixAll"])
    assert await editor.apply(uri, fix_all) == fix_source(path, WITH_COUNTER, Settings(), unsafe_fixes=True).text
    assert await editor.diagnostics(uri) == []


NOTEBOOK = Path(__file__).resolve().parent.parent / "fixtures" / "SL101" / "notebook_amp.ipynb"
FIXED_NOTEBOOK = NOTEBOOK.with_name("notebook_amp.fixed.ipynb")


def notebook_cells(path: Path) -> List[str]:
    return ["".join(cell["source"]) for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]]


async def test_notebook_cells_get_their_diagnostics_and_fixes(editor: Editor):
    """The buggy notebook of the SL101 fixture, opened as VS Code opens notebooks: each cell a
    document; SL101 on the loop's cell; its quick fix edits two cells (the helper goes after the
    imports) and makes the cells `steplint check --fix` makes; fix-all too."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    path = editor.root / "train.ipynb"
    uris = [f"vscode-notebook-cell:{path}#W{n}" for n in range(len(cells))]
    texts = dict(zip(uris, notebook_cells(NOTEBOOK)))
    kinds = [types.NotebookCellKind.Code if c["cell_type"] == "code" else types.NotebookCellKind.Markup for c in cells]
    book = types.NotebookDocument(
        uri=path.as_uri(), notebook_type="jupyter-notebook", version=1, cells=[types.NotebookCell(kind=k, document=u) for k, u in zip(kinds, uris)]
    )
    documents = [
        types.TextDocumentItem(uri=u, language_id="python" if k == types.NotebookCellKind.Code else "markdown", version=1, text=texts[u])
        for u, k in zip(uris, kinds)
    ]
    editor.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(notebook_document=book, cell_text_documents=documents))
    editor.versions.update({u: 1 for u in uris})
    loop_cell = uris[4]
    (diagnostic,) = await editor.diagnostics(loop_cell)
    assert diagnostic.code == "SL101" and diagnostic.range.start == types.Position(8, 4)  # `warmup.step()`, row 9 of cell 5
    others = [u for u, k in zip(uris, kinds) if k == types.NotebookCellKind.Code and u != loop_cell]
    if editor.pull:
        assert [await editor.diagnostics(u) for u in others] == [[]] * len(others)
    else:  # pushed with the loop's cell (each push its own message: waited for), empty; the %%bash cell is not Python: nothing
        assert [await editor.diagnostics(u) for u in others if u != uris[5]] == [[]] * (len(others) - 1)
        assert {p.uri for p in editor.client.published if not p.diagnostics} == set(others) - {uris[5]}

    def applied(edit: types.WorkspaceEdit) -> Dict[str, str]:
        changes = {c.text_document.uri: c.edits for c in edit.document_changes} if edit.document_changes else edit.changes
        return {u: apply_text_edits(texts[u], changes[u], editor.encoding) if u in changes else texts[u] for u in uris}

    async def edit_of(action: types.CodeAction) -> types.WorkspaceEdit:
        return action.edit or (await asyncio.wait_for(editor.client.code_action_resolve_async(action), WAIT)).edit

    actions = await editor.actions(loop_cell, [diagnostic])
    quick_fix = next(a for a in actions if a.kind == "quickfix" and "Disable" not in a.title)
    assert quick_fix.title.startswith("steplint (SL101): ") and quick_fix.is_preferred
    assert "steplint (SL101): Disable for this line" in [a.title for a in actions]
    fixed = applied(await edit_of(quick_fix))
    assert [fixed[u] for u in uris] == notebook_cells(FIXED_NOTEBOOK)
    (fix_all,) = [a for a in await editor.actions(loop_cell, [], only=["source.fixAll"])]
    assert [applied(await edit_of(fix_all))[u] for u in uris] == notebook_cells(FIXED_NOTEBOOK)

    changed = [u for u in uris if fixed[u] != texts[u]]
    assert changed == [uris[1], loop_cell]
    text_content = [
        types.NotebookDocumentCellContentChanges(
            document=types.VersionedTextDocumentIdentifier(uri=u, version=2), changes=[types.TextDocumentContentChangeWholeDocument(text=fixed[u])]
        )
        for u in changed
    ]
    editor.versions.update({u: 2 for u in changed})
    change = types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=text_content))
    editor.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=path.as_uri(), version=2), change=change))
    assert await editor.diagnostics(loop_cell) == []
    editor.client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
        notebook_document=types.NotebookDocumentIdentifier(uri=path.as_uri()), cell_text_documents=[types.TextDocumentIdentifier(uri=u) for u in uris]))
