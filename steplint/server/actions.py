"""Code actions: a quick fix and a "disable for this line" per diagnostic, and fix-all.

Quick fixes and noqa edits come from the diagnostic's `data` (computed when it was published, for
the document version it names), so they need no server state. Fix-all runs the same rounds as
`steplint check --fix` over the current text.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types

from steplint.server.convert import SOURCE_NAME

QUICK_FIX = types.CodeActionKind.QuickFix.value
FIX_ALL = "source.fixAll.steplint"
NOTEBOOK_FIX_ALL = "notebook.source.fixAll.steplint"  # a notebook's fix-all on save, as VS Code asks for it


def wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """The client's `only` filter: a kind matches itself and its sub-kinds (`source` matches
    `source.fixAll.steplint`)."""
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def text_edits(edits: Sequence[Dict[str, Any]]) -> List[types.TextEdit]:
    return [
        types.TextEdit(
            range=types.Range(types.Position(**e["range"]["start"]), types.Position(**e["range"]["end"])),
            new_text=e["newText"],
        )
        for e in edits
    ]


Change = Tuple[str, Optional[int], Sequence[Dict[str, Any]]]  # (document URI, its version, edits)


def workspace_edit(changes: Sequence[Change], versioned: bool) -> types.WorkspaceEdit:
    """Versioned edits when the client takes them (it then refuses them on a stale document)."""
    if versioned:
        return types.WorkspaceEdit(document_changes=[
            types.TextDocumentEdit(text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=text_edits(edits))
            for uri, version, edits in changes
        ])
    return types.WorkspaceEdit(changes={uri: text_edits(edits) for uri, _, edits in changes})


def other_cells(data: Dict[str, Any]) -> List[Change]:
    """A notebook fix's edits in the other cells it touches."""
    return [(cell["uri"], cell["version"], cell["edits"]) for cell in data.get("cells") or ()]


def diagnostic_actions(uri: str, version: Optional[int], diagnostics: Sequence[types.Diagnostic], only, versioned: bool, lazy: bool) -> List[types.CodeAction]:
    """A quick fix and a noqa action per steplint diagnostic of this document version. With `lazy`,
    the actions carry their edits in `data` and codeAction/resolve turns them into the edit."""
    if not wanted(QUICK_FIX, only):
        return []
    fixes, noqas = [], []
    for diagnostic in diagnostics:
        data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
        if diagnostic.source != SOURCE_NAME or data.get("version") != version:
            continue  # another tool's, or made for an older text: its edits would land in the wrong place
        fix, noqa = data.get("fix"), data.get("noqa")
        if fix:
            title = f"{SOURCE_NAME} ({diagnostic.code}): {fix['title']}"
            fixes.append(_action(title, uri, version, fix["edits"], fix.get("cells"), diagnostic, fix["safe"], versioned, lazy))
        if noqa:
            title = f"{SOURCE_NAME} ({diagnostic.code}): Disable for this line"
            noqas.append(_action(title, uri, version, noqa, None, diagnostic, False, versioned, lazy))
    return fixes + noqas


def _action(title, uri, version, edits, cells, diagnostic, preferred, versioned, lazy) -> types.CodeAction:
    action = types.CodeAction(title=title, kind=QUICK_FIX, diagnostics=[diagnostic], is_preferred=preferred or None)
    data = {"uri": uri, "version": version, "edits": edits, "cells": cells}
    if lazy:
        action.data = data
    else:
        action.edit = workspace_edit([(uri, version, edits)] + other_cells(data), versioned)
    return action


def fix_all_action(uri: str, version: Optional[int], changes: Optional[List[Change]], versioned: bool, kind: str = FIX_ALL) -> types.CodeAction:
    """Fix-all (`source.fixAll.steplint`, or its notebook kind); without changes (resolve pending)
    it carries the document in `data`."""
    action = types.CodeAction(title=f"{SOURCE_NAME}: Fix all auto-fixable problems", kind=kind)
    if changes is None:
        action.data = {"uri": uri, "version": version, "fixAll": True}
    else:
        action.edit = workspace_edit(changes, versioned)
    return action
