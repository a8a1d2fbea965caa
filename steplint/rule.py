"""Rule metadata, the registry of built-in rules, and the findings rules yield.

The registry is read from the rule modules' source (their docstrings and `@rule(...)` declarations)
without importing them: printing a rule's docs, validating a configuration or answering a check
from the cache needs no LibCST. A rule's check is imported the first time it runs.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Iterable, Optional

from steplint.fixes import SAFE, UNSAFE

if TYPE_CHECKING:
    import libcst as cst

    from steplint.fixes import Fix

RULES_PACKAGE = "steplint.rules"


@dataclass(frozen=True)
class Finding:
    """What a rule reports: the node, the message, and the fix if it has one."""

    node: "cst.CSTNode"
    message: str
    fix: Optional["Fix"] = None
    evidence: tuple = ()  # the premises it rests on, (claim, row, column) each; () : the engine reads them from the model

    def __post_init__(self) -> None:
        # A message quotes code, and quoted code may span lines (a condition in parentheses): a
        # diagnostic is one line of text or one JSON line, so the quote is put on one line.
        if "\n" in self.message or "\r" in self.message:
            object.__setattr__(self, "message", one_line(self.message))


def one_line(text: str) -> str:
    """`(a\n    and b)` -> `(a and b)`: lines joined by one space, continuation backslashes and the
    spaces just inside brackets dropped."""
    parts = [line.strip().removesuffix("\\").strip() for line in text.splitlines()]
    joined = " ".join(part for part in parts if part)
    for opening in "([{":
        joined = joined.replace(opening + " ", opening)
    for closing in ")]}":
        joined = joined.replace(" " + closing, closing)
    return joined


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    fix: Optional[str]  # "safe", "unsafe", "sometimes" or None: what the rule's fixes can be
    doc: str
    function: Optional[Callable[..., Iterable[Finding]]] = None  # the check, where the rule is declared
    module: Optional[str] = None  # in the registry: the module that declares it, imported on first use

    @property
    def check(self) -> Optional[Callable[..., Iterable[Finding]]]:
        """The rule's check; None: the engine itself reports it."""
        if self.module is None:
            return self.function
        if self.code not in _CHECKS:
            declared = vars(importlib.import_module(self.module)).values()
            _CHECKS[self.code] = next(r.function for r in declared if isinstance(r, Rule) and r.code == self.code)
        return _CHECKS[self.code]

    @property
    def url(self) -> None:
        """steplint has no hosted documentation to link to: `steplint rule CODE` prints a rule's
        docs. (Outputs keep ruff's `url` field, null, and leave out links that would lead nowhere.)"""
        return None


_CHECKS: Dict[str, Optional[Callable]] = {}


def fix_word(fix: Optional[str]) -> str:
    return {"safe": "safe fix", "unsafe": "unsafe fix", "sometimes": "fix sometimes available"}.get(fix or "", "no fix")


def rule_text(found: Rule) -> str:
    """A rule's documentation in Markdown, as `steplint rule CODE` prints it."""
    return f"# {found.name} ({found.code})\n\n{fix_word(found.fix).capitalize()}.\n\n{found.doc}"


def rule(code: str, name: str, summary: str, fix: Optional[str] = None) -> Callable[[Callable], Rule]:
    """Declare a rule: `@rule(...)` over its check; the module docstring is its documentation."""

    def declare(check: Callable) -> Rule:
        doc = sys.modules[check.__module__].__doc__ or ""
        return Rule(code, name, summary, fix, doc.strip(), check)

    return declare


_REGISTRY: Optional[Dict[str, Rule]] = None


def all_rules() -> Dict[str, Rule]:
    """Every built-in rule by code, read once from the source of the steplint.rules package."""
    global _REGISTRY
    if _REGISTRY is None:
        folder = os.path.dirname(importlib.import_module(RULES_PACKAGE).__file__ or "")
        found = []
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py") and not name.startswith("_"):
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    found.extend(_declared(handle.read(), f"{RULES_PACKAGE}.{name[:-3]}"))
        _REGISTRY = {r.code: r for r in sorted(found, key=lambda r: r.code)}
    return _REGISTRY


def _declared(text: str, module_name: str) -> Iterable[Rule]:
    """The rules a module declares: `@rule(code, name, summary, fix=...)` over a function, or
    `NAME = Rule(code=..., name=..., ...)` for the ones the engine reports itself. Only the module's
    docstring and those calls are parsed, not the module (start-up: parsing every rule took 50 ms)."""
    docstring = _DOCSTRING.match(text)
    literal = docstring.group(1) if docstring else '""'
    doc = (literal[3:-3] if "\\" not in literal else ast.literal_eval(literal)).strip()  # (without escapes, the text between the quotes)
    for declaration in _DECLARATION.finditer(text):
        lines = text[declaration.start(1):declaration.start(1) + 2000].splitlines()
        for end in range(1, len(lines) + 1):  # (the call may span lines: parsed once its parentheses close)
            try:
                call = ast.parse("\n".join(lines[:end]).strip(), mode="eval").body
                break
            except SyntaxError:
                continue
        else:
            continue
        calls = [call] if isinstance(call, ast.Call) else []
        for call in calls:
            fields = dict(zip(("code", "name", "summary", "fix"), map(_value, call.args)))
            fields.update({k.arg: _value(k.value) for k in call.keywords if k.arg in ("code", "name", "summary", "fix")})
            yield Rule(fields["code"], fields["name"], fields["summary"], fields.get("fix"), doc, module=module_name)


# The module docstring, and a declaration: `@rule(...)` before a function or `NAME = Rule(...)`, at the start of a line
_DOCSTRING = re.compile(r'\s*(?:#[^\n]*\n\s*)*("""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\')')
_DECLARATION = re.compile(r"^(?:@|[A-Za-z_]\w*[ \t]*=[ \t]*)((?:rule|Rule)\()", re.M)


def _value(node: ast.expr) -> object:
    """A literal, or one of the applicability constants rule modules import (`fix=SAFE`)."""
    if isinstance(node, ast.Name) and node.id in ("SAFE", "UNSAFE"):
        return {"SAFE": SAFE, "UNSAFE": UNSAFE}[node.id]
    return ast.literal_eval(node)
