"""Glob patterns as .gitignore and ruff's exclude read them: `*`, `?`, `**`; no `/` matches any part."""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=None)
def compile_glob(pattern: str) -> "re.Pattern[str]":
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.strip("/") if anchored else pattern.rstrip("/")
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out if anchored else f"(?:.*/)?{out}")


def matches(pattern: str, relative_path: str) -> bool:
    """Whether a path (relative, `/`-separated) or one of its parent folders matches."""
    regex = compile_glob(pattern)
    parts = relative_path.split("/")
    return any(regex.fullmatch("/".join(parts[:n])) for n in range(len(parts), 0, -1))
