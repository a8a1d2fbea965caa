"""Where pygls (2.1) and the protocol disagree, the narrowest override that keeps to the protocol.

- A request whose params do not deserialize: pygls raises while reading the message and never
  answers it; JSON-RPC requires an error response (-32602, invalid params), which is sent here.
- Incremental sync: pygls splits a document into lines with `str.splitlines`, which also breaks on
  form feeds, \\x1c-\\x1e, \\x85 and \\u2028/\\u2029; LSP lines (and steplint's Source) break only on
  \\r\\n, \\r and \\n, so a ranged change after such a character would land on the wrong line.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Sequence

from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol
from pygls.workspace import TextDocument, Workspace

LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class SteplintProtocol(LanguageServerProtocol):
    def structure_message(self, data: Dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and "method" in data:  # a request: it must be answered
                self._send_response(data["id"], error=error.to_response_error())
            raise  # pygls logs it and drops the message

    def count_lines_as_lsp(self) -> None:
        """From the initialize handler, which pygls runs once it has made the workspace and before
        any document is opened: the same workspace, with LSP's lines."""
        made = self.workspace
        self._workspace = LspLinesWorkspace(made.root_uri, made._sync_kind, list(made.folders.values()), made.position_encoding)


class LspLinesDocument(TextDocument):
    @property
    def lines(self) -> Sequence[str]:
        return tuple(LSP_LINE.findall(self.source))


class LspLinesWorkspace(Workspace):
    """pygls's workspace, whose documents count lines as LSP does."""

    def _create_text_document(self, doc_uri: str, source=None, version=None, language_id=None) -> TextDocument:
        return LspLinesDocument(doc_uri, source=source, version=version, language_id=language_id,
                                sync_kind=self._sync_kind, position_codec=self.position_codec)
