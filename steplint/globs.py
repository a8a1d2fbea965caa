"""Glob patterns: `exclude`, `extend-exclude` and `per-file-ignores` use gitignore's syntax, matched
by pathspec's GitIgnoreSpec (`*`, `?`, `**`, `[Ss]`, `[!a]`, `\\#` escapes; a trailing `/` names
folders only; a `/` elsewhere anchors the pattern to the configuration file's folder, without one
it matches at any depth), plus `{a,b}` alternatives, which gitignore lacks and ruff's globs have."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, List, Tuple

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec


@lru_cache(maxsize=None)
def compile_globs(patterns: Tuple[str, ...]) -> "GitIgnoreSpec":
    from pathspec import GitIgnoreSpec  # (at the first pattern matched: `steplint --version` needs none)

    return GitIgnoreSpec.from_lines([alternative for pattern in patterns for alternative in expand_braces(pattern)])


def matches(patterns: Tuple[str, ...], relative_path: str, is_dir: bool = False) -> bool:
    """Whether a `/`-separated path relative to the patterns' folder (or a folder it is in) matches."""
    return compile_globs(patterns).match_file(relative_path + ("/" if is_dir else ""))


def expand_braces(pattern: str) -> List[str]:
    """`src/{a,b}/*.py` -> `src/a/*.py`, `src/b/*.py`; nested braces too. A brace without a comma or
    without its closing brace, and an escaped `\\{`, stay literal."""
    depth, opened, commas = 0, -1, []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            if depth == 0:
                opened, commas = i, []
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0 and commas:
                head, tail = pattern[:opened], pattern[i + 1 :]
                bounds = [opened] + commas + [i]
                choices = [pattern[a + 1 : b] for a, b in zip(bounds, bounds[1:])]
                return [expanded for choice in choices for expanded in expand_braces(head + choice + tail)]
        elif char == "," and depth == 1:
            commas.append(i)
        i += 1
    return [pattern]
