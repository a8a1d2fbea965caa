"""One file's text and the arithmetic between offsets and (row, column) positions."""

from __future__ import annotations

import ast
import re
import sys
import warnings
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

# LibCST (like the tokenizer) breaks lines only on these; str.splitlines() knows more separators.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Comments and strings, in one left-to-right scan (a `#` in a string, a quote in a comment are theirs):
# a comment unnamed, the first quote of a triple-quoted string as group 1 or 2, a one-line string as group 3.
# (Loops unrolled: 1.5x faster. re.S: a backslash may escape a line break. A string's prefix, `r"""`, is
# left to the code: matching it would make every letter a place to try.)
_LEXEMES = re.compile(
    r"#[^\r\n]*"
    r'|(")""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|(')''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r"""|("[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*')""",
    re.S,
)


def code_text(text: str) -> str:
    """`text` without its comments and with its triple-quoted strings (docstrings, usage examples) emptied
    (`""`): what the prefilters search, so that `optimizer.step()` in a docstring sends no module to analysis."""
    return _LEXEMES.sub(r"\3\1\1\2\2", text)  # (a template, not a function: replaced in C)


# Leading whitespace up to its last form feed: Python's tokenizer resets the indentation column at a
# form feed, LibCST's does not (it rejects a nested block so indented, and drops the character).
_FORM_FEED_INDENT = re.compile(r"(?:^|(?<=[\r\n]))[ \t\f]*\f")


def parser_text(text: str) -> str:
    """The text LibCST parses: each line's leading whitespace up to its last form feed removed,
    which Python reads alike. Positions in it map back with Source.parsed_offset."""
    return _FORM_FEED_INDENT.sub("", text) if "\f" in text else text


@dataclass
class Source:
    path: str
    text: str
    line_starts: List[int] = field(init=False, repr=False)
    python_tree: Optional[ast.Module] = field(default=None, repr=False, compare=False)  # Python's own parse, when made

    def __post_init__(self) -> None:
        self.line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(self.text)]

    def offset(self, row: int, column: int) -> int:
        """Offset of a 1-based row and 0-based column."""
        return self.line_starts[row - 1] + column

    def parsed_offset(self, row: int, column: int) -> int:
        """Offset of a position in parser_text(self.text) (LibCST's row and column)."""
        return self.line_starts[row - 1] + self._form_feed_prefixes.get(row, 0) + column

    @cached_property
    def _form_feed_prefixes(self) -> Dict[int, int]:
        """Row -> length of the leading whitespace parser_text removed from it."""
        if "\f" not in self.text:
            return {}
        return {bisect_right(self.line_starts, m.start()): m.end() - m.start() for m in _FORM_FEED_INDENT.finditer(self.text)}

    def position(self, offset: int) -> Tuple[int, int]:
        """1-based row and 0-based column of an offset."""
        row = bisect_right(self.line_starts, offset)
        return row, offset - self.line_starts[row - 1]

    def line(self, row: int) -> str:
        """The text of a 1-based row without its line break."""
        start = self.line_starts[row - 1]
        end = self.line_starts[row] if row < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def line_end(self, row: int) -> int:
        """Offset just past the row's last character, before its line break."""
        return self.line_starts[row - 1] + len(self.line(row))

    @cached_property
    def newline(self) -> str:
        """The file's dominant line break, for inserted lines."""
        counts = {"\r\n": 0, "\n": 0, "\r": 0}
        for m in _LINE_BREAK.finditer(self.text):
            counts[m.group()] += 1
        best = max(counts, key=lambda k: counts[k])
        return best if counts[best] else "\n"

    def indentation(self, row: int) -> str:
        """The row's indentation, as Python reads it (after a form feed, which resets it)."""
        line = self.line(row)[self._form_feed_prefixes.get(row, 0):]
        return line[: len(line) - len(line.lstrip(" \t"))]


def python_parse_error(text: str, path: str = "<unknown>") -> Optional[Exception]:
    """Why Python's own parser rejects the text (SyntaxError, or ValueError for null bytes before
    Python 3.12, RecursionError or MemoryError when too deep), or None when it parses."""
    parsed = parse_python(text, path)
    return parsed if isinstance(parsed, Exception) else None


def parse_python(text: str, path: str = "<unknown>") -> Union[ast.Module, Exception]:
    """Python's syntax tree of the text, or why Python's parser rejects it (see python_parse_error).
    Its SyntaxWarnings (`"\\d"` escapes) are not ours to print."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return error


RUNNING_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"  # the Python that runs steplint, as messages name it


# (errors of every Python that LibCST does not look for: a literal that does not decode, the parser's limits)
_ERRORS_OF_EVERY_PYTHON = ("(unicode error)", "(value error)", "bytes can only contain", "too many ")


def newer_grammar(text: str, error: Exception) -> bool:
    """Python older than 3.12 rejects the text (`error`) and LibCST, whose grammar has Python 3.12's
    additions (quotes, backslashes and line breaks inside an f-string's braces (PEP 701), `type`
    statements, generic functions and classes), parses it: the syntax of a newer Python, not an error."""
    if sys.version_info >= (3, 12) or not isinstance(error, SyntaxError) or (error.msg or "").startswith(_ERRORS_OF_EVERY_PYTHON):
        return False
    import libcst as cst

    try:
        cst.parse_module(parser_text(text))
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError):
        return False
    return True


def source_reader(texts: Mapping[str, str]) -> Callable[[str], Source]:
    """path -> its Source, each built once: a report reads many diagnostics of one file."""
    built: Dict[str, Source] = {}

    def read(path: str) -> Source:
        if path not in built:
            built[path] = Source(path, texts.get(path, ""))
        return built[path]

    return read
