"""steplint's built-in rules: one module per rule, named by code and slug, documented in its docstring."""
