"""Rule metadata, the registry of built-in rules, and the findings rules yield."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional

import libcst as cst

from steplint.fixes import Fix

DOCS_URL = "https://github.com/steplint/steplint/blob/main/README.md#{anchor}"


@dataclass(frozen=True)
class Finding:
    """What a rule reports: the node, the message, and the fix if it has one."""

    node: cst.CSTNode
    message: str
    fix: Optional[Fix] = None


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    fix: Optional[str]  # "safe", "unsafe", "sometimes" or None: what the rule's fixes can be
    doc: str
    check: Optional[Callable[..., Iterable[Finding]]]  # None: the engine itself reports it

    @property
    def url(self) -> str:
        return DOCS_URL.format(anchor=f"{self.code.lower()}-{self.name}")


def rule(code: str, name: str, summary: str, fix: Optional[str] = None) -> Callable[[Callable], Rule]:
    """Declare a rule: `@rule(...)` over its check; the module docstring is its documentation."""

    def declare(check: Callable) -> Rule:
        doc = sys.modules[check.__module__].__doc__ or ""
        return Rule(code, name, summary, fix, doc.strip(), check)

    return declare


_REGISTRY: Optional[Dict[str, Rule]] = None


def all_rules() -> Dict[str, Rule]:
    """Every built-in rule by code, loaded once from the steplint.rules package."""
    global _REGISTRY
    if _REGISTRY is None:
        import steplint.rules as package

        found: List[Rule] = []
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            found.extend(v for v in vars(module).values() if isinstance(v, Rule))
        _REGISTRY = {r.code: r for r in sorted(found, key=lambda r: r.code)}
    return _REGISTRY
