"""## What it does
Reports a file that steplint cannot read, decode or parse, with the parser's line and message.

## Why is this bad?
A file that does not parse cannot be checked: its training loop may hold any of the problems the
other rules find. steplint reports it and goes on with the other files.

Syntax newer than the Python that runs steplint is no error. Under Python 3.11 or older, a file in
Python 3.12's grammar (quotes or line breaks inside an f-string's braces, PEP 701; `type` statements;
generic functions and classes) is analysed on LibCST's parse alone, and its findings carry no fix (the
Python that would check the fix cannot parse the module). Where the project declares an older Python
(`requires-python`, or `target-version`), that syntax breaks the project's own Python, and is reported;
an f-string there is left unanalysed with a warning that says which Python can check it.

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
