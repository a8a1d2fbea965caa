"""## What it does
Reports a file whose analysis or fixing failed inside steplint: a bug in steplint, not in your code.
The message gives the exception's one-line summary; `steplint check -v` prints the traceback.

## Why is this bad?
The file was not checked, so its training loop may hold any of the problems the other rules find.
steplint leaves the file unmodified (no fix is written) and goes on with the other files, so one
file never costs the results of the rest of the run.

An internal error makes `steplint check` exit with status 2 (it wins over 1, "diagnostics remain"),
so CI notices that part of the tree went unchecked; `--exit-zero` makes it exit 0 like any other
diagnostic. SL000 is always reported: `select`, `ignore`, per-file ignores and `# noqa` do not
hide it. Exclude the file to skip it.

## Example
```
train.py:1:1: SL000 Internal error, this file was not checked: AttributeError: 'NoneType' object
has no attribute 'values' (please report it, with the traceback `steplint check -v` prints)
```

## Use instead
Please report it, with the file (or a small file that shows the same error) and the traceback of
`steplint check -v FILE`. Until it is fixed, exclude the file (`extend-exclude`).

## Fix safety
No fix.
"""

from steplint.rule import Rule

RULE = Rule(
    code="SL000",
    name="internal-error",
    summary="steplint failed on this file (a bug in steplint): it was left unchecked and unmodified",
    fix=None,
    doc=__doc__.strip(),
)
