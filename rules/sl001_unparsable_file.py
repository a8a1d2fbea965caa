"""## What it does
Reports a file that steplint cannot read, decode or parse, with the parser's line and message.

## Why is this bad?
A file that does not parse cannot be checked: its training loop may hold any of the problems the
other rules find. steplint reports it and goes on with the other files.

Syntax newer than the Python that runs steplint is no error: where the project targets a newer Python
(`requires-python`, or `target-version`), and, under Python 3.11 or older, for an f-string Python 3.12
accepts (quotes or line breaks inside its braces, PEP 701), the file is left unanalysed with a warning
that says which Python can check it.

## Example
```python
for batch in loader:
    loss = model(batch
```

## Use instead
Fix the syntax error, or exclude the file.

## Fix safety
No fix.
"""

from steplint.rule import Rule

RULE = Rule(
    code="SL001",
    name="unparsable-file",
    summary="File cannot be read, decoded or parsed",
    fix=None,
    doc=__doc__.strip(),
)
