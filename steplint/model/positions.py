"""Positions of the nodes a rule reports or a fix edits, computed only for those nodes.

LibCST's PositionProvider generates the code of the whole module to place every node, which costs
several times the parse. Most files have nothing to report, and a reported node needs only the
top-level statement that holds it: that statement's code is generated alone, starting at its first
line. The line comes from Python's own (C) parser, and the generated code is checked against the
source text at that line, so a position is either exact or computed the slow way, for the whole
module, as before.
"""

from __future__ import annotations

from typing import Dict, Optional

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from steplint.model.structure import Structure
from steplint.source import Source, parse_python


class Positions:
    """node -> CodeRange (1-based lines, 0-based columns, as LibCST's PositionProvider gives them)."""

    def __init__(self, source: Source, module: cst.Module, structure: Structure) -> None:
        self.source = source
        self.module = module
        self.structure = structure
        self._known: Dict[cst.CSTNode, CodeRange] = {}
        self._placed: set = set()  # ids of the top-level statements whose nodes are in _known
        self._first_lines: Optional[Dict[int, int]] = None  # id(top-level statement) -> its first line
        self._whole_module = False

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self.get(node)
        if found is None:
            raise KeyError(node)
        return found

    def get(self, node: cst.CSTNode) -> Optional[CodeRange]:
        """The node's range; None for a node that is not in the module (one the project index
        composed, such as a callee's `self.x` in its caller's terms)."""
        found = self._known.get(node)
        if found is not None:
            return found
        top = self._top_statement(node)
        if top is not None and id(top) not in self._placed:
            self._placed.add(id(top))
            if self._place(top):
                found = self._known.get(node)
                if found is not None:
                    return found
        if not self._whole_module:
            self._whole_module = True
            self._known.update(MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider))
        return self._known.get(node)

    def _top_statement(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        structure = self.structure
        holder = structure.holder.get(id(node), node)
        return structure.top_of.get(id(holder))

    def _place(self, top: cst.CSTNode) -> bool:
        """Positions of every node of one top-level statement; False when its first line cannot be
        told for certain (the caller then places the whole module)."""
        line = self._first_line(top)
        if line is None:
            return False
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent, default_newline=self.module.default_newline, provider=_Collector()
        )
        state.line = line
        top._codegen(state)
        code = "".join(state.tokens)
        start = self.source.line_starts[line - 1] if line - 1 < len(self.source.line_starts) else None
        if start is None or self.source.text[start : start + len(code)] != code:
            return False
        self._known.update(state.provider._computed)
        return True

    def _first_line(self, top: cst.CSTNode) -> Optional[int]:
        if self._first_lines is None:
            self._first_lines = _first_lines(self.source, self.module)
        return self._first_lines.get(id(top))


class _Collector:
    """What PositionProvidingCodegenState writes into: a provider's `_computed` mapping."""

    def __init__(self) -> None:
        self._computed: Dict[cst.CSTNode, CodeRange] = {}


def _first_lines(source: Source, module: cst.Module) -> Dict[int, int]:
    """id(top-level statement) -> the line its generated code starts on (its leading blank and
    comment lines included). Empty when Python's parser disagrees with LibCST's about the file."""
    tree = source.python_tree or parse_python(source.text)
    if isinstance(tree, Exception):
        return {}
    statements = tree.body
    found: Dict[int, int] = {}
    index = 0
    for top in module.body:
        count = len(top.body) if isinstance(top, cst.SimpleStatementLine) else 1
        if index + count > len(statements):
            return {}
        first = statements[index]
        index += count
        line = first.lineno
        decorators = getattr(top, "decorators", ())
        if decorators:
            python_decorators = getattr(first, "decorator_list", [])
            if not python_decorators:
                return {}
            line = min(d.lineno for d in python_decorators) - len(decorators[0].leading_lines)
        found[id(top)] = line - len(top.leading_lines)
    return found if index == len(statements) else {}
