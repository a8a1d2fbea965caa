"""Building the project index of a run: which files belong to the project, the summary of each
(parsed only when its text could hold a step effect, cached by content hash), and the index."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional

import libcst as cst

from steplint import __version__
from steplint.config import CONFIG_NAMES
from steplint.files import FileError, discover, read_text
from steplint.model import build_model
from steplint.project.context import ModuleContext
from steplint.project.index import ProjectIndex
from steplint.project.summarize import summarize
from steplint.project.summary import ModuleSummary
from steplint.source import Source

MAX_PROJECT_FILES = 2000  # beyond this, the rest of a single file's project is not read (and we say so)
MAX_FILE_BYTES = 1_000_000
CACHE_FOLDER = os.path.join(".steplint_cache", "project")
# A module without any of these words has no step effect to summarise (and no call that passes one on).
_SUMMARY_PREFILTER = re.compile(r"step|scaler|save|load_state_dict|clip_grad|backward|reduce|gather|sched|optim", re.I)


@dataclass
class BuiltIndex:
    index: ProjectIndex
    root: str
    notes: List[str] = field(default_factory=list)  # what was left out, for the user

    def context_for(self, path: str):
        relative = _relative(path, self.root)
        return self.index.context_for(relative) if relative is not None else None


def project_root(path: str) -> str:
    """The folder of the project a file belongs to: of its configuration file, else its git root,
    else the folder that holds its outermost package (or its own folder)."""
    folder = os.path.dirname(os.path.abspath(path)) if not os.path.isdir(path) else os.path.abspath(path)
    start = folder
    while True:
        if any(os.path.isfile(os.path.join(folder, name)) for name in CONFIG_NAMES + ("pyproject.toml",)) or os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    while os.path.isfile(os.path.join(start, "__init__.py")) and os.path.dirname(start) != start:
        start = os.path.dirname(start)
    return start


def index_for_run(files: List[str], excluded: Callable[[str], bool], texts: Optional[Dict[str, str]] = None) -> Optional[BuiltIndex]:
    """The index of a run: its files, and when it checks one file (or stdin), the other Python
    files of that file's project too (at most MAX_PROJECT_FILES of them)."""
    if not files:
        return None
    notes = []
    if len(files) == 1:
        root = project_root(files[0])
        others = [p for p in discover([root], excluded)[0] if p.endswith(".py")]
        if len(others) > MAX_PROJECT_FILES:
            notes.append(f"{root} has {len(others)} Python files: only the first {MAX_PROJECT_FILES} are read to follow calls out of {files[0]}")
            others = others[:MAX_PROJECT_FILES]
        paths = files + others
    else:
        common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in files])
        root = project_root(common)
        if any(_relative(p, root) is None for p in files):
            root = common
        paths = files
    built = build_index(paths, root, texts)
    built.notes = notes
    return built


def build_index(paths: Iterable[str], root: str, texts: Optional[Dict[str, str]] = None, settings=None, cache: bool = True) -> BuiltIndex:
    """The index of the files `paths` (under `root`); `texts` gives the text of files not to read
    from disk (a buffer piped in)."""
    from steplint.config import Settings

    settings = settings or Settings()
    summaries: Dict[str, ModuleSummary] = {}
    texts = dict(texts or {})
    store = _Store(root) if cache else None
    for path in paths:
        relative = _relative(path, root)
        if relative is None or relative in summaries:
            continue
        text = texts.get(path)
        if text is None:
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    continue
                text = texts[path] = read_text(path).text
            except (OSError, FileError):
                continue
        summary = summarize_text(relative, text, settings, store)
        if summary is not None:
            summaries[relative] = summary
    index = ProjectIndex(summaries)
    # A helper's parameters often have no role of their own (`def amp_step(scaler, optimizer)`):
    # summarise the modules whose callers give them one again, with those roles.
    again = {}
    for path, text in texts.items():
        relative = _relative(path, root)
        context = index.context_for(relative) if relative is not None else None
        if context is not None and context.parameter_roles:
            again[relative] = summarize_text(relative, text, settings, store, ModuleContext(relative, parameter_roles=context.parameter_roles))
    if again:
        summaries.update({k: v for k, v in again.items() if v is not None})
        index = ProjectIndex(summaries)
    if store is not None:
        store.flush()
    return BuiltIndex(index, root)


def summarize_text(relative: str, text: str, settings, store=None, roles: Optional[ModuleContext] = None) -> Optional[ModuleSummary]:
    """The summary of one module's text (with the roles its callers give its parameters), or None
    when it cannot hold a step effect or does not parse."""
    if not _SUMMARY_PREFILTER.search(text) and not relative.endswith("__init__.py"):
        return None
    given = roles.fingerprint() if roles is not None else ""
    key = hashlib.sha256(f"{__version__}\0{relative}\0{given}\0{text}".encode()).hexdigest()
    if store is not None and key in store:
        return store[key]
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return None
    summary = summarize(build_model(Source(relative, text), module, settings, roles, positions=False), relative)
    if store is not None:
        store[key] = summary
    return summary


def _relative(path: str, root: str) -> Optional[str]:
    relative = os.path.relpath(os.path.abspath(path), root)
    return None if relative.startswith("..") else relative.replace(os.sep, "/")


class _Store:
    """Summaries by content hash, in one JSON file under the project's .steplint_cache/."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, CACHE_FOLDER, "summaries.json")
        self.data: Dict[str, dict] = {}
        self.used: set = set()  # what this run read or wrote: the rest is stale and dropped on flush
        self.dirty = False
        try:
            with open(self.path, encoding="utf-8") as handle:
                self.data = json.load(handle)
        except (OSError, ValueError):
            self.data = {}

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def __getitem__(self, key: str) -> ModuleSummary:
        self.used.add(key)
        return ModuleSummary.from_dict(self.data[key])

    def __setitem__(self, key: str, summary: ModuleSummary) -> None:
        self.used.add(key)
        self.data[key] = summary.to_dict()
        self.dirty = True

    def flush(self) -> None:
        if not self.dirty and self.used == set(self.data):
            return
        self.data = {k: v for k, v in self.data.items() if k in self.used}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            ignore = os.path.join(os.path.dirname(os.path.dirname(self.path)), ".gitignore")
            if not os.path.exists(ignore):  # as ruff does: the cache never shows up in `git status`
                with open(ignore, "w", encoding="utf-8") as handle:
                    handle.write("# Automatically created by steplint.\n*\n")
            temporary = self.path + f".{os.getpid()}.tmp"
            with open(temporary, "w", encoding="utf-8") as handle:
                json.dump(self.data, handle)
            os.replace(temporary, self.path)
        except OSError:
            pass  # a read-only tree: the next run summarises again
