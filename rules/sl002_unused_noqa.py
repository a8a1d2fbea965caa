"""## What it does
Finds steplint codes in `# noqa: ...` comments that suppress nothing on their line.

## Why is this bad?
A stale suppression hides the next real problem on that line, and tells readers that something is
wrong where nothing is. Only steplint's own codes (`SL` and three digits, such as `SL101`) are
checked: codes of other tools in the same comment are theirs (ruff's `SLOT000` too), and a bare
`# noqa` may serve another tool.

## Example
```python
scheduler.step()  # noqa: SL101, E501
```
when `scheduler.step()` is gated and SL101 has nothing to report.

## Use instead
```python
scheduler.step()  # noqa: E501
```

## Fix safety
Safe: the fix removes the unused codes, or the whole comment when nothing else is in it.
"""

from steplint.fixes import SAFE
from steplint.rule import Rule

RULE = Rule(
    code="SL002",
    name="unused-noqa",
    summary="`# noqa` names a steplint code that suppresses nothing",
    fix=SAFE,
    doc=__doc__.strip(),
)
