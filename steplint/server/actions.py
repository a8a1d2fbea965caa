"""Code actions: a quick fix and a "disable for this line" per diagnostic, and fix-all.

Quick fixes and noqa edits come from the diagnostic's `data` (computed when it was published, for
the document version it names), so they need no server state. Fix-all runs the same rounds as
`steplint check --fix` over the current text.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from lsprotocol import types

from steplint.server.convert import SOURCE_NAME

QUICK_FIX = types.CodeActionKind.QuickFix.value
FIX_ALL = "source.fixAll.steplint"


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


def workspace_edit(uri: str, version: Optional[int], edits: Sequence[Dict[str, Any]], versioned: bool) -> types.WorkspaceEdit:
    """Versioned edits when the client takes them (it then refuses them on a stale document)."""
    if versioned:
        document = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=document, edits=text_edits(edits))])
    return types.WorkspaceEdit(changes={uri: text_edits(edits)})


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
            fixes.append(_action(title, QUICK_FIX, uri, version, fix["edits"], [diagnostic], fix["safe"], versioned, lazy))
        if noqa:
            title = f"{SOURCE_NAME} ({diagnostic.code}): Disable for this line"
            noqas.append(_action(title, QUICK_FIX, uri, version, noqa, [diagnostic], False, versioned, lazy))
    return fixes + noqas


def _action(title, kind, uri, version, edits, diagnostics, preferred, versioned, lazy) -> types.CodeAction:
    action = types.CodeAction(title=title, kind=kind, diagnostics=diagnostics or None, is_preferred=preferred or None)
    if lazy:
        action.data = {"uri": uri, "version": version, "edits": edits}
    else:
        action.edit = workspace_edit(uri, version, edits, versioned)
    return action


def fix_all_action(uri: str, version: Optional[int], edits: Optional[List[Dict[str, Any]]], versioned: bool) -> types.CodeAction:
    """`source.fixAll.steplint`; without edits (resolve pending) it carries the document in `data`."""
    action = types.CodeAction(title=f"{SOURCE_NAME}: Fix all auto-fixable problems", kind=FIX_ALL)
    if edits is None:
        action.data = {"uri": uri, "version": version, "fixAll": True}
    else:
        action.edit = workspace_edit(uri, version, edits, versioned)
    return action
