"""The server's view of the editor's documents, through pytest-lsp's real client: URIs as editors
escape them, incremental changes in UTF-16 positions, a document too large to analyse, and a
request whose params cannot be read."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from typing import Tuple

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from test_server import TRAINING, UNITS, WAIT, Editor, client, codes, editor  # noqa: F401 (fixtures)

pytestmark = pytest.mark.asyncio

BOTH_WAYS = pytest.mark.parametrize("client", ["visual-studio-code", "visual-studio-code-pull"], indirect=True)


@BOTH_WAYS
@pytest.mark.parametrize("folder", ["my runs", "été", "c%3A"])
async def test_escaped_uris_get_diagnostics_and_actions(editor: Editor, folder: str):
    """VS Code escapes a space as %20, non-ASCII as UTF-8 bytes and a drive's colon as %3A."""
    (editor.root / folder.replace("%3A", ":")).mkdir()
    uri = editor.uri(folder.replace("%3A", ":")).replace("/c:", "/c%3A") + "/train.py"
    assert "%" in uri
    editor.texts[uri], editor.versions[uri] = TRAINING, 1
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=TRAINING)
    editor.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.code == "SL101"
    fix = next(a for a in await editor.actions(uri, [diagnostic]) if "Disable" not in a.title)
    await editor.apply(uri, fix)
    assert await editor.diagnostics(uri) == []


@pytest.mark.parametrize("client", ["visual-studio-code"], indirect=True)
async def test_a_request_with_unreadable_params_is_answered_with_invalid_params(editor: Editor):
    """Sent raw over the real transport: pytest-lsp's typed methods could not send it."""
    protocol = editor.client.protocol
    answer = asyncio.get_running_loop().create_future()
    protocol._request_futures["unreadable"] = answer  # the client's table of awaited responses
    protocol._send_data({"jsonrpc": "2.0", "id": "unreadable", "method": "textDocument/codeAction", "params": {"textDocument": 7}})
    with pytest.raises(JsonRpcInvalidParams) as raised:
        await asyncio.wait_for(answer, WAIT)
    assert raised.value.code == -32602
    uri = editor.open("train.py", TRAINING)  # still serving
    assert codes(await editor.diagnostics(uri)) == ["SL101"]


def lsp_position(text: str, offset: int, encoding: str = "utf-16") -> types.Position:
    """(line, column in the encoding's units) of an offset, lines broken only on \\r\\n, \\r
    and \\n, as LSP says."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    line = max(i for i, start in enumerate(starts) if start <= offset)
    codec, unit = UNITS[encoding]
    return types.Position(line, len(text[starts[line] : offset].encode(codec)) // unit)


def ranged_change(editor: Editor, uri: str, old: str, new: str) -> Tuple[str, types.Range]:
    """Replace the one occurrence of `old` by `new` with a ranged change, as an editor types it."""
    text = editor.texts[uri]
    assert text.count(old) == 1
    start = text.index(old)
    change_range = types.Range(lsp_position(text, start), lsp_position(text, start + len(old)))
    editor.texts[uri] = text[:start] + new + text[start + len(old) :]
    editor.versions[uri] += 1
    document = types.VersionedTextDocumentIdentifier(uri=uri, version=editor.versions[uri])
    change = types.TextDocumentContentChangePartial(range=change_range, text=new)
    editor.client.text_document_did_change(types.DidChangeTextDocumentParams(text_document=document, content_changes=[change]))
    return editor.texts[uri], change_range


@BOTH_WAYS
async def test_incremental_changes_in_utf16_positions(editor: Editor):
    assert editor.client.initialize_result.capabilities.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    # A form feed (a page break, blank to Python and to LSP) and characters outside the BMP before the edits.
    text = TRAINING.replace("\nfor inputs", "\n\x0c\nlabel = 'ⓛⓡ 😀'  # 😀😀\nfor inputs")
    uri = editor.open("train.py", text)
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.range.start == lsp_position(text, text.index("scheduler.step()"))

    # An astral character typed on the scheduler's own line, before it: the diagnostic follows.
    text, _ = ranged_change(editor, uri, "    scheduler.step()\n", "    note = '😀'; scheduler.step()\n")
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.code == "SL101" and diagnostic.range.start == lsp_position(text, text.index("scheduler.step()"))

    # One line, then several lines at once: the step is gated, SL101 is gone.
    ranged_change(editor, uri, "scaler.step(optimizer)", "committed = scaler.step(optimizer)")
    ranged_change(editor, uri, "    note = '😀'; scheduler.step()\n", "    note = '😀'\n    if committed:\n        scheduler.step()\n")
    assert await editor.diagnostics(uri) == []
    # A multi-line deletion that takes the gate away again.
    text, _ = ranged_change(editor, uri, "    if committed:\n        scheduler.step()\n", "    scheduler.step()\n")
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.range.start == lsp_position(text, text.index("scheduler.step()"))
    # The server's text is the editor's: the noqa edit, computed on it, lands on the scheduler's line.
    (noqa,) = [a for a in await editor.actions(uri, [diagnostic]) if "Disable" in a.title]
    fixed = await editor.apply(uri, noqa)
    assert "    note = '😀'\n    scheduler.step()  # noqa: SL101\n" in fixed and "label = 'ⓛⓡ 😀'  # 😀😀" in fixed
    assert await editor.diagnostics(uri) == []


@BOTH_WAYS
async def test_a_document_too_large_is_not_analysed_and_the_user_is_told(editor: Editor):
    large = TRAINING + "x = 1\n" * 400_000  # 2.4 million characters
    uri = editor.open("generated.py", large)
    assert await editor.diagnostics(uri) == []
    (told,) = [m.message for m in editor.client.log_messages if "not analysed" in m.message]
    assert told.startswith(uri) and "2.4 million characters" in told
    editor.change(uri, TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]


@BOTH_WAYS
async def test_a_document_nested_too_deep_to_analyse_is_not_analysed_and_the_user_is_told(editor: Editor):
    bomb = TRAINING + "total = " + " + ".join(["1"] * 1000) + "\n"  # a flat sum: small, but nested past the bound
    uri = editor.open("nested.py", bomb)
    assert await editor.diagnostics(uri) == []
    (told,) = [m.message for m in editor.client.log_messages if "not analysed" in m.message]
    assert told.startswith(uri) and "nested more than" in told
    editor.change(uri, TRAINING)
    assert codes(await editor.diagnostics(uri)) == ["SL101"]


@BOTH_WAYS
async def test_a_file_name_that_is_not_utf8_is_checked_and_the_project_still_read(editor: Editor):
    """A file whose name is not UTF-8 (its URI escapes the raw byte, %E9) is one more document: it
    gets its diagnostics, and the other documents keep what the rest of the project tells them."""
    from test_server import TRAIN_WITH_UTILS, UTILS

    name = os.fsdecode(b"caf\xe9.py")
    (editor.root / name).write_text(TRAINING)
    (editor.root / "utils.py").write_text(UTILS)
    (editor.root / "train.py").write_text(TRAIN_WITH_UTILS)
    uri = editor.uri("") + "/caf%E9.py"
    editor.texts[uri], editor.versions[uri] = TRAINING, 1
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=TRAINING)
    editor.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.code == "SL101"
    for related in diagnostic.related_information or []:  # the premises point at the file itself
        assert related.location.uri == uri
    train = editor.open("train.py", TRAIN_WITH_UTILS)
    (saver,) = await editor.diagnostics(train)
    assert saver.code == "SL302" and "utils.py:4" in saver.message
    fix = next(a for a in await editor.actions(uri, [diagnostic]) if "Disable" not in a.title)
    await editor.apply(uri, fix)
    assert await editor.diagnostics(uri) == []


NEWER = "type Pair[T] = tuple[T, T]\n\n\ndef first[T](pair: Pair[T]) -> T:\n    return pair[0]\n"  # PEP 695, Python 3.12
RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running Python parses 3.12's grammar itself")
@pytest.mark.parametrize("client", ["visual-studio-code"], indirect=True)
async def test_a_document_in_the_grammar_of_the_projects_newer_python_is_analysed_not_called_broken(editor: Editor):
    """Python 3.12's grammar is analysed on LibCST's parse (steplint.source.newer_grammar), as by `steplint check`."""
    pyproject = editor.root / "pyproject.toml"
    pyproject.write_text('[project]\nname = "demo"\nrequires-python = ">=3.12"\n')
    uri = editor.open("generic.py", NEWER)
    assert await editor.diagnostics(uri) == []
    assert not [m.message for m in editor.client.log_messages if "not analysed" in m.message]
    # The project now says it runs on 3.9: the same text is broken for it.
    pyproject.write_text('[project]\nname = "demo"\nrequires-python = ">=3.9"\n')
    editor.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)])
    )
    editor.change(uri, NEWER)
    (broken,) = await editor.diagnostics(uri)
    assert broken.code == "SL001" and f"(checked with Python {RUNNING})" in broken.message
