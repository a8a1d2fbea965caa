"""Which modules of a project can tell the lint of some module anything: those connected to it by
imports, in either direction.

The index resolves a call only into a module that the caller imports (or into itself), directly or
through a package that re-exports it, and what flows between modules (effects to callers, roles to
callees, which functions are called) flows along resolved calls only. So the modules outside the
linted modules' component of the import graph cannot change what their lints see, and need no
summary: a run over one file of a large project, or over a library where a few modules pass the
prefilter, summarises the few modules connected to them, not every module that passes it.

The imports are read from the text by pattern, erring towards more: every `import` word with the
names after it (also in comments and strings), every `from X import` with X.name for each name (and
X itself for `*`).
An extra edge only makes the component larger; a missed one would make it wrong.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from typing import Dict, Iterable, Iterator, List, Set

from steplint.project.index import dotted_names, dotted_tails, import_root, modules_for

_CONTINUED = r"[^\n;\\]*(?:\\\r?\n[^\n;\\]*)*"  # the rest of a logical line, backslash continuations included
# (Led by a literal, not by `\b`, these search 20x faster; the word boundary before is checked after.)
_FROM = re.compile(r"from[ \t]+(\.*[\w.]*)[ \t]*(?:\\\r?\n[ \t]*)*import\b[ \t]*(\([^)]*\)|" + _CONTINUED + ")")
_IMPORT = re.compile(r"import\b[ \t]*(" + _CONTINUED + ")")
_NAME = re.compile(r"[\w.]+")


def connected_modules(imports_of: Dict[str, Iterable[str]], start: Iterable[str]) -> Set[str]:
    """The modules (keys of `imports_of`: module -> the modules it may import, `imports`) connected
    by imports, in either direction, to those in `start`."""
    linked: Dict[str, Set[str]] = {path: set() for path in imports_of}
    for importer, targets in imports_of.items():
        for target in targets:
            linked[importer].add(target)
            linked[target].add(importer)
    seen = {path for path in start if path in imports_of}
    pending = list(seen)
    while pending:
        for other in linked[pending.pop()]:
            if other not in seen:
                seen.add(other)
                pending.append(other)
    return seen


def imports(imported: Dict[str, List[str]]) -> Dict[str, Set[str]]:
    """Module -> the modules of the project it may import, from the names each may import (`imported_names`)."""
    paths = sorted(imported)
    known = set(paths)
    dotted = dotted_names(paths)
    names = sorted(dotted)
    tails = dotted_tails(paths)
    found: Dict[str, Set[str]] = {path: set() for path in paths}
    candidates: Dict[tuple, List[str]] = {}  # (folder, name) -> targets: the same for all modules of a folder
    for importer in paths:
        folder = posixpath.dirname(importer)
        for qualified in imported[importer]:
            targets = candidates.get((folder, qualified))
            if targets is None:
                targets = candidates[folder, qualified] = list(_candidates(paths, known, dotted, names, tails, importer, qualified))
            found[importer].update(target for target in targets if target != importer)
    return found


def imported_names(text: str) -> List[str]:
    """The qualified names a module's text may import, each once."""
    return sorted(set(_imported(text)))


def _imported(text: str) -> Iterator[str]:
    """Qualified names a module may import, as ImportMap writes them (`.utils.save`, `pkg.mod`)."""
    spans = []
    for match in _FROM.finditer(text):
        if not _word_start(text, match.start()):
            continue
        base, names = match.group(1), match.group(2)
        spans.append(match.span())
        if "*" in names:
            yield base
        for name in _names(names):
            yield f"{base}.{name}" if base and not base.endswith(".") else base + name
    starts = [start for start, _ in spans]
    for match in _IMPORT.finditer(text):
        within = bisect.bisect_right(starts, match.start()) - 1
        if _word_start(text, match.start()) and (within < 0 or spans[within][1] <= match.start()):  # (not a `from X import`)
            for name in _names(match.group(1)):  # (`import a.b` binds `a` too: a call through `a.x` reaches a/__init__.py)
                parts = name.split(".")
                yield from (".".join(parts[:end]) for end in range(1, len(parts) + 1))


def _word_start(text: str, index: int) -> bool:
    return index == 0 or not (text[index - 1].isalnum() or text[index - 1] == "_")


def _names(listed: str) -> Iterator[str]:
    """The imported names of `a.b as c, d  # comment` or `(\n a,\n b as c,\n)`."""
    for piece in re.sub(r"#[^\n]*", "", listed).strip("()").split(","):
        name = _NAME.search(piece)
        if name is not None:
            yield name.group()


def _candidates(paths: List[str], known: Set[str], dotted: Dict[str, str], names: List[str], tails: Dict[str, List[str]], importer: str,
                qualified: str) -> Iterator[str]:
    """The modules a call through `qualified`, or through any attribute path below it, can resolve into."""
    found = [target for target, _ in modules_for(known, dotted, importer, qualified)]
    yield from found
    root, parts, relative = import_root(importer, qualified)
    if not found and not relative:  # (each module the name may find on a folder some script puts on `sys.path`)
        yield from (path for cut in range(1, len(parts) + 1) for path in tails.get(".".join(parts[:cut]), ()))
    stem = "/".join([root, *parts] if root else parts)
    yield from _starting_with(paths, stem + "/" if stem else "")
    if not relative and parts:
        yield from (dotted[name] for name in _starting_with(names, ".".join(parts) + "."))


def _starting_with(ordered: List[str], prefix: str) -> Iterator[str]:
    for index in range(bisect.bisect_left(ordered, prefix), len(ordered)):
        if not ordered[index].startswith(prefix):
            return
        yield ordered[index]
