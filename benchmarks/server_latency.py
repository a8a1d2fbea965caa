"""Latency of `steplint server` as an editor sees it, on a ~300-line training file.

    python benchmarks/server_latency.py [FILE] [--rounds N]

Starts the real server over stdio with a pygls client, in a temporary project holding one copy of
the file per round (the server indexes that project, as `steplint check FILE` does), and measures,
wall clock at the client: open -> diagnostics, change -> diagnostics (a new version each time, so nothing is cached; this
includes the server's settle time for changes; the server idle before each open), code actions on the reported diagnostic (for a
client that resolves edits lazily, and for one that wants them at once, which computes fix-all),
and codeAction/resolve of fix-all. The engine's own lint time, wall and CPU, in this process, is
printed for reference. A benchmark, not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from lsprotocol import types
from pygls.lsp.client import LanguageClient

HERE = Path(__file__).resolve().parent
DEFAULT_FILE = HERE / "data" / "finetune_regressor.py"
# Between rounds, as between a user's actions: closing an edited file gives the project its disk
# text again (a re-index on the server's engine thread), which the next open would otherwise wait for.
IDLE_SECONDS = 1.0


def capabilities(lazy: bool) -> types.ClientCapabilities:
    code_action = types.CodeActionClientCapabilities(
        code_action_literal_support=types.ClientCodeActionLiteralOptions(
            code_action_kind=types.ClientCodeActionKindOptions(value_set=["quickfix", "source.fixAll"])
        ),
        is_preferred_support=True,
        data_support=True,
        resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]) if lazy else None,
    )
    return types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True, data_support=True),
            code_action=code_action,
        ),
        workspace=types.WorkspaceClientCapabilities(workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)),
    )


class Client:
    def __init__(self) -> None:
        self.lsp = LanguageClient("server-latency", "1")
        self.published: Dict[Tuple[str, int], Tuple[float, List[types.Diagnostic]]] = {}
        self.arrived = asyncio.Event()
        self.lint_ms: List[float] = []  # the server's own account (debug log): lint time on its engine thread

        @self.lsp.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def publish(params: types.PublishDiagnosticsParams) -> None:
            self.published[(params.uri, params.version)] = (time.perf_counter(), params.diagnostics)
            self.arrived.set()

        @self.lsp.feature(types.WINDOW_LOG_MESSAGE)
        def log(params: types.LogMessageParams) -> None:
            found = re.search(r"diagnostics in (\d+) ms", params.message)
            if found:
                self.lint_ms.append(float(found.group(1)))

    async def start(self, root: Path, lazy: bool) -> None:
        await self.lsp.start_io(sys.executable, "-m", "steplint", "server")
        options = {"logLevel": "debug"}
        await self.lsp.initialize_async(types.InitializeParams(capabilities=capabilities(lazy), root_uri=root.as_uri(), initialization_options=options))
        self.lsp.initialized(types.InitializedParams())

    async def diagnostics_of(self, uri: str, version: int) -> Tuple[float, List[types.Diagnostic]]:
        while (uri, version) not in self.published:
            self.arrived.clear()
            await self.arrived.wait()
        return self.published[(uri, version)]

    async def stop(self) -> None:
        await self.lsp.shutdown_async(None)
        self.lsp.exit(None)
        await self.lsp.stop()


def summary(name: str, seconds: List[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    return f"{name:<44} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   min {ms[0]:7.1f} ms   (n={len(ms)})"


async def measure(path: Path, rounds: int) -> None:
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    print(f"{path.name}: {lines} lines\n")
    for lazy in (True, False):
        project = Path(tempfile.mkdtemp(prefix="steplint-latency-"))
        for i in range(rounds):
            (project / f"opened_{i}.py").write_text(text, encoding="utf-8")
        client = Client()
        await client.start(project, lazy)
        opened, changed, actions, resolved = [], [], [], []
        for i in range(rounds):
            uri = (project / f"opened_{i}.py").as_uri()
            item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            start = time.perf_counter()
            client.lsp.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
            arrived, diagnostics = await client.diagnostics_of(uri, 1)
            opened.append(arrived - start)

            for version in range(2, 5):  # typing: each change a new text
                new = text + f"# edit {version}\n"
                document = types.VersionedTextDocumentIdentifier(uri=uri, version=version)
                start = time.perf_counter()
                client.lsp.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=document, content_changes=[types.TextDocumentContentChangeWholeDocument(text=new)]))
                arrived, diagnostics = await client.diagnostics_of(uri, version)
                changed.append(arrived - start)

            params = types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=diagnostics[0].range,
                context=types.CodeActionContext(diagnostics=diagnostics),
            )
            start = time.perf_counter()
            found = await client.lsp.text_document_code_action_async(params)
            actions.append(time.perf_counter() - start)
            fix_all = [a for a in found if a.kind == "source.fixAll.steplint"]
            if lazy and fix_all:
                start = time.perf_counter()
                await client.lsp.code_action_resolve_async(fix_all[0])
                resolved.append(time.perf_counter() - start)
            client.lsp.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
            await asyncio.sleep(IDLE_SECONDS)
        await client.stop()
        shutil.rmtree(project)
        kind = "lazy (resolveSupport: edit)" if lazy else "eager (edits in the answer)"
        if lazy:
            print(summary("open -> diagnostics", opened))
            print(summary("change -> diagnostics", changed))
            print(summary("  of which the server's lint (its log)", [ms / 1000 for ms in client.lint_ms]))
        print(summary(f"codeAction, {kind}", actions))
        if resolved:
            print(summary("codeAction/resolve of fix-all", resolved))

    from steplint.config import Settings
    from steplint.engine import lint_source

    settings = Settings()
    lint_source(str(path), text, settings)
    engine, cpu = [], []
    for i in range(rounds):
        start, start_cpu = time.perf_counter(), time.thread_time()
        lint_source(str(path), text + f"# {i}\n", settings)
        engine.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    print(summary("engine: lint_source alone (reference)", engine))
    print(summary("engine: its CPU time (less load-dependent)", cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--rounds", type=int, default=10)
    arguments = parser.parse_args()
    asyncio.run(measure(arguments.file, arguments.rounds))


if __name__ == "__main__":
    main()
