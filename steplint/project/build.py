"""Building the project index of a run: which files belong to the project, the summary of each
(parsed only when its text could hold a step effect, cached by content hash), and the index."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional

from steplint import __version__
from steplint.cache import code_signature
from steplint.config import CONFIG_NAMES, ConfigError
from steplint.engine import needs_analysis
from steplint.files import SKIPPED_DIRS, FileError, read_text
from steplint.pool import PARALLEL_FROM_TASKS, Pool
from steplint.project.context import ModuleContext
from steplint.project.index import ProjectIndex, dotted_names, modules_for
from steplint.project.launches import CodeNotes, Launches, code_notes, is_python_config, read_launches
from steplint.project.reach import connected_modules, imported_names, imports
from steplint.project.summary import SUMMARY_FORMAT, ModuleSummary
from steplint.source import Source, code_text, newer_grammar, parse_python, parser_text

MAX_PROJECT_FILES = 2000  # beyond this, the rest of a single file's project is not read (and we say so)
MAX_FILE_BYTES = 1_000_000
CACHE_DIR_NAME = ".steplint_cache"
# A module without any of these words has no step effect to summarise (and no call that passes one on,
# no `import *` that re-exports one, no command-line options another module may test). (Substring tests: many times faster than one regex of them all.)
_SUMMARY_WORDS = (".step(", "save", "load_state_dict", "clip_grad", ".backward(", "all_reduce", "all_gather", "reduce_", "optim.", "lr_scheduler", "import *", "add_argument", "param_groups")
_INCREMENT = re.compile(r"\+= *1\b")
# A `__main__` block that does something: a run may start in the module (`if __name__ == "__main__": pass` starts none)
_MAIN_BLOCK = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']\s*:(?!\s*(?:#[^\n]*\s*)*pass\s*(?:#[^\n]*\s*)*\Z)""", re.M)


@dataclass
class BuiltIndex:
    index: ProjectIndex
    root: str
    notes: List[str] = field(default_factory=list)  # what was left out, for the user

    def context_for(self, path: str):
        relative = relative_path(path, self.root)
        return self.index.context_for(relative) if relative is not None else None


def project_root(path: str) -> str:
    """The folder of the project a file belongs to: of its configuration file, else its git root,
    else the folder that holds its outermost package (or its own folder)."""
    return _marked_root(path) or _package_root(path)


def _marked_root(path: str) -> Optional[str]:
    folder = os.path.dirname(os.path.abspath(path)) if not os.path.isdir(path) else os.path.abspath(path)
    while True:
        if any(os.path.isfile(os.path.join(folder, name)) for name in CONFIG_NAMES + ("pyproject.toml",)) or os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _package_root(path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path)) if not os.path.isdir(path) else os.path.abspath(path)
    while os.path.isfile(os.path.join(folder, "__init__.py")) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


def project_files(path: str, limit: int = MAX_PROJECT_FILES) -> tuple:
    """(root, Python files of the project of `path`, whether some were left out). A project marked
    by a configuration file or a git root is walked whole (default-excluded folders skipped); an
    unmarked folder (a script in /tmp) only with its packages, not every folder below it."""
    marked = _marked_root(path)
    root = marked or _package_root(path)
    return (root, *python_files_under(root, whole=marked is not None, limit=limit))


def python_files_under(root: str, whole: bool = True, limit: int = MAX_PROJECT_FILES) -> tuple:
    """(the Python files under `root`, whether some were left out): every folder but the default-excluded
    ones, or (`whole` false) only its packages."""
    found: List[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".")
                         and (whole or os.path.isfile(os.path.join(folder, d, "__init__.py"))))
        for name in sorted(files):
            if name.endswith(".py"):
                if len(found) == limit:
                    return found, True
                found.append(os.path.join(folder, name))
    return found, False


def index_for_run(
    files: List[str], excluded: Callable[[str], bool], texts: Optional[Dict[str, str]] = None, cache: bool = True, cache_dir: Optional[str] = None,
    analysed: Iterable[str] = (), pool: Optional[Pool] = None, text_store: Optional["SummaryStore"] = None,
) -> Optional[BuiltIndex]:
    """The index of a run: its files, and when it checks one file (or stdin), the other Python
    files of that file's project too (at most MAX_PROJECT_FILES of them). Summaries are cached in
    `cache_dir` (default: .steplint_cache under the project root) unless `cache` is false. The files
    in `analysed` (those the run lints) keep their parse for their lint, in the process that
    summarised them: this one, or the worker of `pool` that will lint them."""
    if not files:
        return None
    notes = []
    if len(files) == 1:
        root, others, cut = project_files(files[0])
        if cut:
            notes.append(f"{root} has more than {MAX_PROJECT_FILES} Python files: calls out of {files[0]} are followed into the first {MAX_PROJECT_FILES} only")
        paths = files + [p for p in others if not _excluded(excluded, p)]
    else:
        common = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in files])
        root = project_root(common)
        if any(relative_path(p, root) is None for p in files):
            root = common
        paths = files
    built = build_index(paths, root, texts, cache=cache, cache_dir=cache_dir, analysed=analysed, pool=pool, text_store=text_store)
    built.notes = notes
    return built


def _excluded(excluded: Callable[[str], bool], path: str) -> bool:
    try:
        return excluded(path)
    except ConfigError:
        return True  # a folder with a broken configuration of its own: not read for summaries


def build_index(
    paths: Iterable[str], root: str, texts: Optional[Dict[str, str]] = None, settings=None, cache: bool = True, cache_dir: Optional[str] = None,
    analysed: Iterable[str] = (), pool: Optional[Pool] = None, text_store: Optional["SummaryStore"] = None,
) -> BuiltIndex:
    """The index of the files `paths` (under `root`); `texts` gives the text of files not to read
    from disk (a buffer piped in); `analysed`: the paths whose parse is kept for their lint;
    `text_store`: the store of text facts the run read already (text_facts_store)."""
    directory = cache_dir or os.path.join(root, CACHE_DIR_NAME)
    store = SummaryStore(directory) if cache else None
    text_store = (text_store or text_facts_store(directory)) if cache else None
    analysed = list(analysed)
    every = read_modules(paths, root, texts)
    facts = text_facts(every, text_store)
    found = {relative: text for relative, text in every.items() if summarized(relative, text, facts[relative].summarized)}
    kept = {relative: path for path in analysed if (relative := relative_path(path, root)) in found}
    imports_store = SummaryStore(directory, "imports.json", dict) if cache else None
    imports_of = functools.partial(project_imports, store=imports_store)
    launches = launch_facts(root, every, facts, imports_of)
    unseen = unseen_importers({r: facts[r].imported for r in every}, found, imports_store)
    if analysed:  # a run's lints learn nothing from modules not connected to theirs
        found = {relative: found[relative] for relative in connected_modules(imports_of({r: facts[r].imported for r in found}), kept)}
    built = index_modules(found, root, settings, store, kept, pool, launches, unseen)
    for written in (store, text_store, imports_store):
        if written is not None:
            written.flush()
    return built


def unseen_importers(imported: Dict[str, List[str]], summarised: Iterable[str], store: Optional["SummaryStore"] = None) -> FrozenSet[str]:
    """What the modules with no summary may import (`imported`: module -> the names it may import, for every module):
    `path` for a module imported whole, `path:name` for a name imported from it, `*:name` for a name imported from a
    package (which may re-export it from any of its modules). A call there, unseen, may hand those functions anything.
    From `store` when a run read the same names before."""
    seen = set(summarised)
    if store is not None:
        key = _content_key("unseen", json.dumps(imported, sort_keys=True), json.dumps(sorted(seen)))
        if key not in store:
            store[key] = {"unseen": sorted(unseen_importers(imported, seen))}
        return frozenset(store[key]["unseen"])
    paths = set(imported)
    dotted = dotted_names(paths)
    found = set()
    for importer, names in imported.items():
        for qualified in names if importer not in seen else ():
            for target, attribute in modules_for(paths, dotted, importer, qualified):
                name = attribute.split(".")[0]
                if target == importer:
                    continue
                found.add(target if not name else f"*:{name}" if target.endswith("__init__.py") else f"{target}:{name}")
    return frozenset(found)


@dataclass
class TextFacts:
    """What the project reads off a module's text by pattern, without parsing it: read once per text,
    and kept in the cache beside the summaries (a warm run reads none of these patterns again)."""

    analysed: bool  # it passes the lint's prefilter (steplint.engine.needs_analysis)
    summarized: bool  # its code can hold a step effect (`summarized`, the package rule aside)
    script: bool  # it has a `__main__` block: a run may start in it
    imported: List[str]  # the qualified names it may import (steplint.project.reach)
    notes: CodeNotes  # what it tells the launch facts

    @classmethod
    def from_dict(cls, data: dict) -> "TextFacts":
        return cls(data["analysed"], data["summarized"], data["script"], data["imported"], CodeNotes.from_dict(data["notes"]))


def text_facts_store(directory: str) -> "SummaryStore":
    """The store of text facts in a cache folder."""
    return SummaryStore(directory, "texts.json", TextFacts.from_dict)


def text_facts(texts: Dict[str, str], store: Optional["SummaryStore"] = None) -> Dict[str, TextFacts]:
    """The facts of each text (by path), from `store` where it holds them, else read (and stored)."""
    found = {}
    for relative, text in texts.items():
        key = _content_key(text)
        if store is not None and key in store:
            found[relative] = store[key]
            continue
        found[relative] = TextFacts(needs_analysis(text), _summary_words_in_code(text), _MAIN_BLOCK.search(text) is not None, imported_names(text), code_notes(text))
        if store is not None:
            store[key] = found[relative]
    return found


def project_imports(imported: Dict[str, List[str]], store: Optional["SummaryStore"] = None) -> Dict[str, List[str]]:
    """Module -> the modules of the project it may import (`imports`, from the names each may import),
    from `store` when a run read the same names before: a warm run resolves no import again."""
    if store is None:
        return {importer: sorted(targets) for importer, targets in imports(imported).items()}
    key = _content_key("imports", json.dumps(imported, sort_keys=True))
    if key not in store:
        store[key] = project_imports(imported)
    return store[key]


def launch_facts(root: str, texts: Dict[str, str], facts: Optional[Dict[str, TextFacts]] = None,
                 imports_of: Callable[[Dict[str, List[str]]], Dict[str, List[str]]] = project_imports) -> Launches:
    """The launch facts of the project under `root`, with what the code of its modules (`texts`, by
    relative path; `facts`: theirs, when read already) sets: config keys set true, the values of globals.
    `imports_of`: the project's imports from the names its modules may import (project_imports)."""
    facts = text_facts(texts) if facts is None else facts
    launches = read_launches(root)
    graph = functools.lru_cache(maxsize=None)(lambda: imports_of({relative: found.imported for relative, found in facts.items()}))
    if launches.switches_given_to_scripts():  # (a switch given to a script reaches the modules it imports)
        launches.note_imports(graph())
    # (the values of globals only where they can matter: for a script that runs a configurator,
    # `exec(open("configurator.py").read())`)
    globals_ = any("exec(" in text for text in texts.values())
    for relative, found in facts.items():
        runs_a_configurator = globals_ and "exec(" in texts[relative]
        launches.note_code_notes(found.notes, globals_ and not runs_a_configurator and is_python_config(relative))
        if runs_a_configurator:  # (its globals are its own defaults; another such script's are not its config)
            launches.note_own_globals(relative, found.notes)
    if globals_:
        # Such a script takes its globals from Python config files the run may not lint, and that it need
        # not import: the project's other files say which globals they set.
        others = [p for p in python_files_under(root)[0] if relative_path(p, root) not in texts]
        for relative, text in read_modules(others, root).items():
            launches.note_code(text, is_python_config(relative))
    if launches.options_for_unnamed_scripts():  # (...which a module that runs only inside scripts other lines name is not given)
        launches.note_importers(graph(), {relative for relative, found in facts.items() if found.script})
    return launches


def module_texts(paths: Iterable[str], root: str, texts: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Relative path -> text of the files `paths` that can hold a step effect (others are left
    out of the index); `texts` gives the text of files not to read from disk."""
    return {relative: text for relative, text in read_modules(paths, root, texts).items() if summarized(relative, text)}


def read_modules(paths: Iterable[str], root: str, texts: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Relative path -> text of each of the files `paths` that reads (`texts`: of files not to read from disk)."""
    texts = texts or {}
    found: Dict[str, str] = {}
    for path in paths:
        relative = relative_path(path, root)
        if relative is None or relative in found:
            continue
        text = texts.get(path)
        if text is None:
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    continue
                text = read_text(path).text
            except (OSError, FileError):
                continue
        found[relative] = text
    return found


def summarized(relative: str, text: str, words_in_code: Optional[bool] = None) -> bool:
    """Whether a module's text can hold a step effect (or re-export one, as a package's __init__): the
    words count in its code, not in comments and docstrings (searched only when the whole text has them).
    `words_in_code`: whether they are there, when known (TextFacts.summarized)."""
    return relative.endswith("__init__.py") or (_summary_words_in_code(text) if words_in_code is None else words_in_code)


def _summary_words_in_code(text: str) -> bool:
    return _summary_words(text) and _summary_words(code_text(text))


def _summary_words(text: str) -> bool:
    return any(word in text for word in _SUMMARY_WORDS) or "scaler" in text.lower() or _INCREMENT.search(text) is not None


def index_modules(
    texts: Dict[str, str], root: str, settings=None, store: Optional["SummaryStore"] = None, kept: Optional[Dict[str, str]] = None,
    pool: Optional[Pool] = None, launches: Optional[Launches] = None, unseen_importers: FrozenSet[str] = frozenset(),
) -> BuiltIndex:
    """The index of modules given by relative path and text, their summaries read from and
    written to `store` (not flushed). `kept`: relative path -> the path of its lint later in the
    run, for the modules whose parse is kept for that lint (in the worker of `pool` that will lint
    them, else in this process). Summaries are computed in `pool` when there are enough of them.
    `launches`: the project's launch facts, when read already (else read from `root`)."""
    from steplint.config import Settings

    settings = settings or Settings()
    kept = kept or {}
    launches = launch_facts(root, texts) if launches is None else launches  # (a module's effects are those of its runs: with the options they are given)
    summaries = _summaries({relative: (text, _launched(relative, launches)) for relative, text in texts.items()}, settings, store, kept, pool)
    index = ProjectIndex(summaries, launches, unseen_importers)
    # A helper's parameters often have no role of their own (`def amp_step(scaler, optimizer)`):
    # summarise the modules whose callers give them one again, with those roles.
    again = {}
    for relative in summaries:
        roles = index.parameter_roles(relative)
        if roles:
            again[relative] = (texts[relative], replace(_launched(relative, launches), parameter_roles=roles))
    if again:
        summaries.update(_summaries(again, settings, store, kept, pool))
        index = ProjectIndex(summaries, launches, unseen_importers)
    return BuiltIndex(index, root)


def _launched(relative: str, launches: Launches) -> ModuleContext:
    return ModuleContext(relative, **launches.context_of(relative))


def _summaries(jobs: Dict[str, tuple], settings, store, kept: Dict[str, str], pool: Optional[Pool]) -> Dict[str, ModuleSummary]:
    """Summaries from the cache, the rest computed: in `pool` when there are many or a worker holds
    the parse of some (a module the run lints in the worker that will lint it), else here. In the
    order of `jobs` whatever the cache held, so that the index reads them in one order."""
    cached: Dict[str, ModuleSummary] = {}
    missing = []
    for relative, (text, roles) in jobs.items():
        key = _key(relative, text, roles)
        if store is not None and key in store:
            cached[relative] = store[key]
        else:
            missing.append((key, relative, text, roles))
    calls = [(relative, text, settings, roles, kept.get(relative)) for _, relative, text, roles in missing]
    if pool is not None and (len(calls) >= PARALLEL_FROM_TASKS or any(call[4] in pool.owners for call in calls)):
        # Biggest first, each parse to the least loaded worker: the workers finish together.
        order = sorted(range(len(calls)), key=lambda i: -len(calls[i][1]))
        owners = [pool.owner(calls[i][4], len(calls[i][1])) if calls[i][4] is not None else None for i in order]
        finished = dict(zip(order, pool.map(summarize_text, [calls[i] for i in order], owners, lambda call, why: None)))
        computed = [finished[i] for i in range(len(calls))]  # (a module that kills its worker twice: no summary)
    else:
        computed = [summarize_text(*call) for call in calls]
    for (key, relative, _, _), summary in zip(missing, computed):
        if summary is not None and store is not None:
            store[key] = summary
    summaries = dict(zip((m[1] for m in missing), computed))
    return {relative: found for relative in jobs if (found := cached.get(relative) or summaries.get(relative)) is not None}


def _key(relative: str, text: str, roles: Optional[ModuleContext]) -> str:
    return _content_key(str(SUMMARY_FORMAT), relative, roles.fingerprint() if roles is not None else "", text)


def _content_key(*parts: str) -> str:
    """A cache key of records computed from `parts` (a module's text last) by this version of the analyzer."""
    # (with the analyzer's own files, as the diagnostics' keys: an edited summarizer must not answer from old entries)
    # (surrogatepass: a file name that is not UTF-8 comes from the OS with escapes that strict UTF-8 refuses)
    return hashlib.sha256("\0".join((__version__, code_signature(), *parts)).encode("utf-8", "surrogatepass")).hexdigest()


def summarize_text(relative: str, text: str, settings, roles: Optional[ModuleContext] = None, keep_as: Optional[str] = None) -> Optional[ModuleSummary]:
    """The summary of one module's text (with the roles its callers give its parameters), or None
    when it does not parse or nests too deeply to analyse. `keep_as`: the path of the file's lint
    later in the run, which then reuses this parse."""
    import libcst as cst  # (outside the try: its except clause names it)

    from steplint.engine import analysis_bound, keep_model, parse_and_keep
    from steplint.model import build_model
    from steplint.project.summarize import summarize

    python_tree = parse_python(text)
    if isinstance(python_tree, Exception) and not newer_grammar(text, python_tree) or analysis_bound(text, python_tree) is not None:
        return None  # its own lint says why it is not analysed (SL001, or a warning); the project knows nothing of it
    try:
        if keep_as is None:
            return summarize(build_model(Source(relative, text), cst.parse_module(parser_text(text)), settings, roles), relative)
        # (the source as the lint names it: its lint may take this model; without Python's tree, which the lint has)
        model = build_model(Source(keep_as, text), parse_and_keep(keep_as, text), settings, roles, keep_walk=True)
        keep_model(keep_as, model)
        return summarize(model, relative)
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError):
        return None  # the file's own lint reports it (SL001); the project just knows less of it
    except Exception:  # noqa: BLE001 (a bug of ours: the run goes on, and a lint that meets it reports SL000)
        return None


def relative_path(path: str, root: str) -> Optional[str]:
    relative = os.path.relpath(os.path.abspath(path), root)
    return None if relative.startswith("..") else relative.replace(os.sep, "/")


class SummaryStore:
    """Summaries (or other records of a text: `decode` reads one back) by content hash, in one JSON file
    (`name`) under the project's .steplint_cache/."""

    def __init__(self, directory: str, name: str = "summaries.json", decode: Callable[[dict], object] = ModuleSummary.from_dict) -> None:
        self.path = os.path.join(directory, "project", name)
        self.decode = decode
        self.data: Dict[str, object] = {}  # a record as read (a dict), or as computed (written out on flush)
        self.loaded: Dict[str, object] = {}  # read back already (a server re-indexes often)
        self.used: set = set()  # what this run read or wrote: the rest is stale and dropped on flush
        self.dirty = False
        try:
            with open(self.path, encoding="utf-8") as handle:
                self.data = json.load(handle)
        except (OSError, ValueError):
            self.data = {}

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def __getitem__(self, key: str):
        self.used.add(key)
        if key not in self.loaded:
            self.loaded[key] = self.decode(self.data[key])
        return self.loaded[key]

    def __setitem__(self, key: str, summary) -> None:
        self.used.add(key)
        self.data[key] = summary  # (summaries are not changed once made)
        self.loaded[key] = summary
        self.dirty = True

    def flush(self) -> None:
        if not self.dirty and self.used == set(self.data):
            return
        self.data = {k: v for k, v in self.data.items() if k in self.used}
        self.loaded = {k: v for k, v in self.loaded.items() if k in self.used}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            ignore = os.path.join(os.path.dirname(os.path.dirname(self.path)), ".gitignore")
            if not os.path.exists(ignore):  # as ruff does: the cache never shows up in `git status`
                with open(ignore, "w", encoding="utf-8") as handle:
                    handle.write("# Automatically created by steplint.\n*\n")
            temporary = self.path + f".{os.getpid()}.tmp"
            with open(temporary, "w", encoding="utf-8") as handle:
                # dumps, not dump: only dumps takes json's C encoder; the dataclasses as their fields
                handle.write(json.dumps(self.data, default=vars))
            os.replace(temporary, self.path)
        except OSError:
            pass  # a read-only tree: the next run summarises again
