"""steplint's own `children` gives LibCST's `children`, node for node and in order, over whole modules;
the walk's `walked_children` gives the same without the tokens."""

from pathlib import Path

import libcst as cst
import pytest

from steplint.model.syntax import _TOKENS, children, walked_children

from conftest import FIXTURES

LIBCST = Path(cst.__file__).parent
MODULES = (
    sorted(FIXTURES.glob("SL*/*.py"))
    + sorted((Path(__file__).parent.parent / "steplint").rglob("*.py"))
    + [LIBCST / "_nodes" / "expression.py", LIBCST / "_nodes" / "statement.py", LIBCST / "_parser" / "conversions" / "expression.py"]
)
SYNTAX = """
from .. import (a as b, c)
from . import *
async def f(*args, x: int = 1, **kw) -> "T":
    async with a as (b, c), d:
        async for i in g(): yield i
    return [await x async for x in y if x] or {k: v for k, v in z} or {*s} or (lambda *, q=1: q)
    del a[1:2:3], b.c
    global G
    x = -a if not b else ~c; y @= z ** 2 // 3
    try: pass
    except* (E1, E2) as e: raise X from e
    finally: print(f"{x!r:>{w}} {y=}", *a, **b)
    match p:
        case [1, *rest] | {"k": _, **kw} if rest: pass
        case Point(x=0) as pt: pass
    while (n := n - 1) > 0: continue
    else: assert x, "msg"
@decorator(1)
class C(B, metaclass=M): x: int; z = ...
"""


def _assert_same(module: cst.Module) -> int:
    stack, count = [module], 0
    while stack:
        node = stack.pop()
        expected = node.children
        found = children(node)
        assert len(found) == len(expected) and all(a is b for a, b in zip(found, expected)), type(node).__name__
        walked, without_tokens = walked_children(node), [c for c in expected if type(c) not in _TOKENS]
        assert len(walked) == len(without_tokens) and all(a is b for a, b in zip(walked, without_tokens)), type(node).__name__
        stack.extend(expected)
        count += 1
    return count


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_children_match_libcst(path):
    assert _assert_same(cst.parse_module(path.read_text(encoding="utf-8"))) > 1


def test_children_match_libcst_on_every_statement_form():
    assert _assert_same(cst.parse_module(SYNTAX)) > 100


def test_node_classes_tested_by_type_have_no_subclasses():
    """The model tests some node classes with `type(x) is cst.X` (isinstance of an ABC is slow): that
    is an isinstance only while cst.X has no subclasses, in this LibCST and the next."""
    import re

    from steplint.model.syntax import _SCOPE_KINDS

    source = "\n".join(p.read_text() for p in (Path(__file__).parent.parent / "steplint").rglob("*.py"))
    tested = set(re.findall(r"(?:type\([\w.]+\) is (?:not )?|(?:statement|node|kind) is )cst\.(\w+)", source))
    classes = {getattr(cst, name) for name in tested} | set(_SCOPE_KINDS)
    assert len(classes) > 10
    assert {c.__name__: c.__subclasses__() for c in classes if c.__subclasses__()} == {}
