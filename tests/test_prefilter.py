"""The prefilters (steplint.engine.needs_analysis, steplint.project.build.summarized) search the code,
not its comments and docstrings: code_text drops exactly those, and no code with them."""

import importlib.util
import io
import tokenize
from pathlib import Path

import pytest

from steplint.engine import needs_analysis
from steplint.project.build import summarized
from steplint.source import code_text

ROOT = Path(__file__).resolve().parent.parent
TORCH = Path(importlib.util.find_spec("torch").origin).parent


def _code_tokens(text: str):
    """The tokens of the code: names, operators, numbers and one-line strings, each string with what it
    holds only if it is a one-line string (a triple-quoted one is emptied, a comment dropped)."""
    kept = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER):
            kept.append(token.string)
        elif token.type == tokenize.STRING:
            body = token.string.lstrip("rRbBuUfF")
            kept.append(token.string[:len(token.string) - len(body)] + ('""' if body.startswith(('"""', "'''")) else body))
    return kept


def _sources():
    yield from sorted((ROOT / "steplint").rglob("*.py"))
    yield from sorted((ROOT / "fixtures").rglob("*.py"))
    for folder in ("optim", "amp", "nn/modules", "utils/data"):
        yield from sorted((TORCH / folder).glob("*.py"))


def test_code_text_keeps_every_token_of_the_code():
    changed = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        try:
            expected = _code_tokens(text)
        except (tokenize.TokenError, SyntaxError):
            continue  # (a fixture of broken code)
        if _code_tokens(code_text(text)) != expected:
            changed.append(str(path))
    assert changed == []


def test_code_text_drops_comments_and_empties_docstrings_only():
    text = 'def f():\n    """Call optimizer.step() here."""\n    x = "# not a comment"  # scaler\n    return \'it\\\'s\' + r"""a\\\nb"""\n'
    assert code_text(text) == 'def f():\n    ""\n    x = "# not a comment"  \n    return \'it\\\'s\' + r""\n'


@pytest.mark.parametrize("text, analysed", [
    ('"""Usage:\n    optimizer.step()\n    scheduler.step()\n"""\nimport torch\n', False),
    ("import torch\n# the scaler is made elsewhere\nx = 1\n", False),
    ("import torch\nx = 1  # noqa: SL101\n", True),  # (a steplint noqa to check, SL002)
    ("import torch\nscheduler.step()  # see the docs\n", True),
    ("text = 'scaler'\n", True),  # (a one-line string is code: a checkpoint's key)
])
def test_the_lint_prefilter_reads_the_code(text, analysed):
    assert needs_analysis(text) is analysed


def test_the_summary_prefilter_reads_the_code():
    assert not summarized("ops.py", 'def f(ctx):\n    """Like torch.save(obj, path)."""\n    return ctx\n')
    assert summarized("ckpt.py", "import torch\n\ndef f(obj, path):\n    torch.save(obj, path)\n")
    assert summarized("pkg/__init__.py", "")
