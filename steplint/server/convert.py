"""steplint's offsets and diagnostics in the Language Server Protocol's terms.

LSP positions are (line, character) where lines break only on \\r\\n, \\r and \\n (as steplint's
Source breaks them) and characters count in the position encoding agreed at initialize: UTF-16 code
units unless the client offered UTF-8 or UTF-32. Everything a code action needs later (the fix's
edits, the noqa edit, the document version) travels in the diagnostic's `data`, as plain JSON.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, List, Optional

from lsprotocol import types
from pygls.uris import from_fs_path

from steplint.diagnostic import Diagnostic
from steplint.engine import SYNTAX_ERROR, UNUSED_NOQA
from steplint.fixes import SAFE, Edit
from steplint.source import Source
from steplint.suppress import Comments, add_noqa_edits

SOURCE_NAME = "steplint"
SEVERITIES = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}

Units = Callable[[str], int]  # the length of a string in the client's position units


def position(source: Source, offset: int, units: Units) -> Dict[str, int]:
    row, column = source.position(offset)
    return {"line": row - 1, "character": units(source.line(row)[:column])}


def text_edit(source: Source, edit: Edit, units: Units) -> Dict[str, object]:
    return {"range": {"start": position(source, edit.start, units), "end": position(source, edit.end, units)}, "newText": edit.content}


def whole_text_edit(old: str, new: str, units: Units) -> Dict[str, object]:
    """One edit turning old into new, spanning only what differs (the cursor and folds elsewhere stay)."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    # Never split a \r\n pair: LSP positions cannot point between its two characters.
    if prefix and old[prefix - 1] == "\r" and prefix < len(old) and old[prefix] == "\n":
        prefix -= 1
    end = len(old) - suffix
    if 0 < end < len(old) and old[end - 1] == "\r" and old[end] == "\n":
        end += 1
        suffix -= 1
    return text_edit(Source("", old), Edit(prefix, end, new[prefix : len(new) - suffix]), units)


def noqa_edits(source: Source, found: Comments, diagnostic: Diagnostic, units: Units) -> Optional[List[Dict[str, object]]]:
    """The edits adding `# noqa: CODE` to the diagnostic's row (or CODE to its noqa list); None when
    the row cannot take a comment (a backslash continuation would swallow it)."""
    row = diagnostic.noqa_row
    if row is None or diagnostic.code in (SYNTAX_ERROR, UNUSED_NOQA) or source.line(row).endswith("\\"):
        return None
    edits = add_noqa_edits(source, found, {row: [diagnostic.code]})
    return [text_edit(source, e, units) for e in edits] or None


def lsp_diagnostic(source: Source, diagnostic: Diagnostic, found: Comments, version: Optional[int], severity: str, units: Units,
                   uri: Optional[str] = None) -> types.Diagnostic:
    fix = diagnostic.fix
    data = {
        "version": version,
        "fix": None if fix is None else {
            "title": fix.title,
            "safe": fix.applicability == SAFE,
            "edits": [text_edit(source, e, units) for e in fix.edits],
        },
        "noqa": noqa_edits(source, found, diagnostic, units),
    }
    start, end = position(source, diagnostic.start, units), position(source, diagnostic.end, units)
    return types.Diagnostic(
        range=types.Range(types.Position(**start), types.Position(**end)),
        message=diagnostic.message,
        severity=types.DiagnosticSeverity.Error if diagnostic.code == SYNTAX_ERROR else SEVERITIES[severity],
        code=diagnostic.code,
        code_description=types.CodeDescription(href=diagnostic.url) if diagnostic.url else None,
        source=SOURCE_NAME,
        tags=[types.DiagnosticTag.Unnecessary] if diagnostic.code == UNUSED_NOQA else None,
        related_information=related_information(source, diagnostic, units, uri),
        data=data,
    )


def related_information(source: Source, diagnostic: Diagnostic, units: Units, uri: Optional[str] = None) -> Optional[List[types.DiagnosticRelatedInformation]]:
    """The diagnostic's premises (`check --show-evidence`), each at the place it was established, in
    the document's file (`uri`: the document's, as the editor spelled it; a URI made from a path
    names another file when the name is not UTF-8); none for a document that is not a file (its path
    is made up)."""
    if not diagnostic.evidence or not os.path.isabs(source.path):
        return None
    uri = uri or from_fs_path(source.path)
    found = []
    for claim, row, column in diagnostic.evidence:
        at = types.Position(**position(source, source.offset(row, column - 1), units))
        found.append(types.DiagnosticRelatedInformation(types.Location(uri, types.Range(at, at)), claim))
    return found


def lsp_diagnostics(source: Source, diagnostics: Iterable[Diagnostic], found: Comments, version: Optional[int], severity: str, units: Units,
                    uri: Optional[str] = None) -> List[types.Diagnostic]:
    return [lsp_diagnostic(source, d, found, version, severity, units, uri) for d in diagnostics]
