"""The project index as the server keeps it, so a document is linted with what the rest of its
project tells about it, as `steplint check FILE` lints it.

One index per project root (found as the command line finds it), built once from the files on
disk and the open documents' unsaved texts, with the summaries cache the command line shares.
When a module's text changes, only that module is summarised again (the others are answered from
the in-memory store) and the open documents whose project context changed are the ones to re-lint:
a change to `utils.py` re-publishes `train.py` when `train.py` calls what changed, and nothing else.
Everything here runs on the server's one engine thread.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, List, Optional

from steplint.project.build import SummaryStore, index_modules, launch_facts, module_texts, project_files, project_root, read_modules, relative_path, summarized, unseen_importers
from steplint.project.reach import imported_names
from steplint.pool import Pool
from steplint.project.context import ModuleContext


class ServerProject:
    def __init__(self, root: str, files: Iterable[str], open_texts: Dict[str, str], cache_dir: Optional[str]) -> None:
        self.root = root
        self.store = SummaryStore(cache_dir) if cache_dir else None
        every = read_modules(files, root, open_texts)
        self.texts = {relative: text for relative, text in every.items() if summarized(relative, text)}  # of the summarised modules
        self.imported = {relative: imported_names(text) for relative, text in every.items()}  # of every module, for unseen_importers
        self.launches = launch_facts(root, every)  # (read once: an edited launch script is seen by the next server)
        with Pool(os.cpu_count() or 1) as pool:
            self._reindex(pool)
        if self.store is not None:
            self.store.flush()  # (only now: typing would fill the cache with every version of a module)

    def _reindex(self, pool: Optional[Pool] = None) -> None:
        self.built = index_modules(self.texts, self.root, None, self.store, pool=pool, launches=self.launches,
                                   unseen_importers=unseen_importers(self.imported, self.texts))
        self._contexts: Dict[str, Optional[ModuleContext]] = {}

    def context_for(self, path: str) -> Optional[ModuleContext]:
        if path not in self._contexts:
            self._contexts[path] = self.built.context_for(path)
        return self._contexts[path]

    def update(self, path: str, text: Optional[str]) -> bool:
        """A module's text changed (None: it is gone); whether the index changed with it."""
        relative = relative_path(path, self.root)
        if relative is None:
            return False
        kept = text if text is not None and summarized(relative, text) else None
        imported = imported_names(text) if text is not None else None
        if self.texts.get(relative) == kept and self.imported.get(relative) == imported:
            return False
        if imported is None:
            self.imported.pop(relative, None)
        else:
            self.imported[relative] = imported
        if kept is None:
            del self.texts[relative]
        else:
            self.texts[relative] = kept
        self._reindex()
        return True


class Projects:
    """The project of each document path, built on first use."""

    def __init__(self, excluded: Callable[[str], bool], cache_dir: Callable[[str], Optional[str]]) -> None:
        self.excluded = excluded  # the path is excluded by its settings: not read for summaries
        self.cache_dir = cache_dir  # the summaries cache folder for a path (None: no cache)
        self.by_root: Dict[str, ServerProject] = {}

    def of(self, path: str, open_texts: Dict[str, str]) -> ServerProject:
        root = project_root(path)
        if root not in self.by_root:
            _, files, _ = project_files(path)
            others = [f for f in files if not self.excluded(f)]
            self.by_root[root] = ServerProject(root, [path] + others, open_texts, self.cache_dir(path))
        return self.by_root[root]

    def context_for(self, path: str, open_texts: Dict[str, str]) -> Optional[ModuleContext]:
        return self.of(path, open_texts).context_for(path)

    def changed(self, path: str, text: Optional[str], open_paths: List[str], open_texts: Dict[str, str]) -> Dict[str, Optional[str]]:
        """Module `path` now reads `text` (None: as on disk, or gone): the open documents of its
        project whose project context changed (`path` itself among them when its own did), with
        the fingerprint of their new context."""
        project = self.of(path, open_texts)
        if text is None:
            text = _disk_text(path)
        members = [p for p in open_paths if relative_path(p, project.root) is not None]
        before = {p: fingerprint(project.context_for(p)) for p in members}
        if not project.update(path, text):
            return {}
        after = {p: fingerprint(project.context_for(p)) for p in members}
        return {p: after[p] for p in members if after[p] != before[p]}


def fingerprint(context: Optional[ModuleContext]) -> Optional[str]:
    """What a lint read from the project (None: nothing)."""
    return context.fingerprint() if context is not None else None


def _disk_text(path: str) -> Optional[str]:
    texts = module_texts([path], os.path.dirname(path) or ".")
    return next(iter(texts.values()), None)
