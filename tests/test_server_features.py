"""Hover on noqa codes, the server's commands, the `enable` setting and the notebook fix-all kind,
through pytest-lsp's real client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Dict, List

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from steplint.config import Settings
from steplint.engine import fix_source
from steplint.rule import all_rules
from test_server import (  # noqa: F401 (fixtures)
    FIXED_NOTEBOOK, NOTEBOOK, TRAINING, WAIT, Editor, apply_text_edits, client, codes, editor, notebook_cells,
)
from test_server_documents import BOTH_WAYS, lsp_position

pytestmark = pytest.mark.asyncio


def hover_at(editor: Editor, uri: str, position: types.Position):
    params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)
    return asyncio.wait_for(editor.client.text_document_hover_async(params), WAIT)


@pytest.mark.parametrize("client", ["visual-studio-code", "neovim"], indirect=True)
async def test_hover_on_a_noqa_code_shows_the_rule(editor: Editor):
    text = TRAINING.replace("    scheduler.step()\n", "    scheduler.step()  # 😀 # noqa: E501, SL101\n")
    uri = editor.open("train.py", text)
    assert await editor.diagnostics(uri) == []
    start = text.index("SL101")
    shown = await hover_at(editor, uri, lsp_position(text, start + 2, editor.encoding))
    rule = all_rules()["SL101"]
    assert rule.summary in shown.contents.value and rule.name in shown.contents.value
    assert shown.range == types.Range(lsp_position(text, start, editor.encoding), lsp_position(text, start + 5, editor.encoding))
    assert await hover_at(editor, uri, lsp_position(text, text.index("E501") + 1, editor.encoding)) is None  # not ours
    assert await hover_at(editor, uri, lsp_position(text, text.index("scaler.step"), editor.encoding)) is None  # no noqa there


@BOTH_WAYS
async def test_fix_all_command_asks_the_editor_to_apply_the_fixes(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    await editor.diagnostics(uri)
    command = types.ExecuteCommandParams(command="steplint.fixAll", arguments=[{"uri": uri}])
    await asyncio.wait_for(editor.client.workspace_execute_command_async(command), WAIT)
    (applied,) = editor.client.applied
    edit = applied.edit
    edits = edit.document_changes[0].edits if edit.document_changes else edit.changes[uri]
    fixed = apply_text_edits(TRAINING, edits, editor.encoding)
    assert fixed == fix_source(str(editor.root / "train.py"), TRAINING, Settings()).text != TRAINING
    with pytest.raises(JsonRpcInvalidParams):
        await asyncio.wait_for(editor.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="steplint.fixAll", arguments=["file:///not/open.py"])), WAIT)


@pytest.mark.parametrize("client", ["visual-studio-code"], indirect=True)
async def test_show_rule_command_gives_what_steplint_rule_prints(editor: Editor):
    assert "steplint.showRule" in editor.client.initialize_result.capabilities.execute_command_provider.commands
    command = types.ExecuteCommandParams(command="steplint.showRule", arguments=["sl101"])
    shown = await asyncio.wait_for(editor.client.workspace_execute_command_async(command), WAIT)
    printed = subprocess.run([sys.executable, "-m", "steplint", "rule", "SL101"], capture_output=True, text=True, check=True).stdout
    assert shown == printed.rstrip("\n") and shown.startswith("# scheduler-step-on-skipped-update (SL101)")
    with pytest.raises(JsonRpcInvalidParams):
        await asyncio.wait_for(editor.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="steplint.showRule", arguments=["SL999"])), WAIT)


async def test_enable_false_clears_the_diagnostics_and_true_brings_them_back(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    (diagnostic,) = await editor.diagnostics(uri)
    before = len(editor.client.published), editor.client.diagnostic_refresh_count
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"steplint": {"enable": False}}))
    for _ in range(WAIT * 100):  # cleared without a change from the editor
        if editor.pull and editor.client.diagnostic_refresh_count > before[1]:
            break
        if not editor.pull and [p for p in editor.client.published[before[0]:] if p.uri == uri and not p.diagnostics]:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the published diagnostics were not cleared")
    assert await editor.diagnostics(uri) == []
    assert await editor.actions(uri, [diagnostic]) == []
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"steplint": {"enable": True}}))
    editor.change(uri, TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]


@pytest.mark.parametrize("client", ["visual-studio-code"], indirect=True)
async def test_notebook_fix_all_has_its_own_kind(editor: Editor):
    """VS Code's `notebook.codeActionsOnSave` asks a cell for `notebook.source.fixAll`: the action
    fixes the whole notebook as `steplint check --fix` does."""
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
    assert codes(await editor.diagnostics(uris[4])) == ["SL101"]
    assert "notebook.source.fixAll.steplint" in editor.client.initialize_result.capabilities.code_action_provider.code_action_kinds

    (action,) = await editor.actions(uris[0], [], only=["notebook.source.fixAll"])
    assert action.kind == "notebook.source.fixAll.steplint"
    if action.edit is None:
        action = await asyncio.wait_for(editor.client.code_action_resolve_async(action), WAIT)
    changes: Dict[str, List[types.TextEdit]] = {c.text_document.uri: c.edits for c in action.edit.document_changes}
    fixed = [apply_text_edits(texts[u], changes.get(u, []), editor.encoding) for u in uris]
    assert fixed == notebook_cells(FIXED_NOTEBOOK)
    # Asked for source actions only, a cell gets source.fixAll once, not the notebook kind too.
    assert [a.kind for a in await editor.actions(uris[4], [], only=["source"])] == ["source.fixAll.steplint"]
    # A plain Python file never gets the notebook kind.
    uri = editor.open("train.py", TRAINING)
    await editor.diagnostics(uri)
    assert await editor.actions(uri, [], only=["notebook.source.fixAll"]) == []
