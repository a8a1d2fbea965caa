"""`steplint server`: the language server (LSP over stdio, on pygls) that editors run.

    app.py       the server: document sync, scheduling, handlers
    settings.py  the editor's settings and the steplint Settings of each document
    convert.py   diagnostics and edits in LSP terms
    actions.py   quick fixes, "disable for this line", fix-all
    protocol.py  where pygls departs from the protocol: invalid params answered, LSP's line breaks
"""

from steplint.server.app import create_server, serve

__all__ = ["create_server", "serve"]
