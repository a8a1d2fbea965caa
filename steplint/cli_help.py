"""`steplint check --help` in sections, as ruff's help is (Rule selection, File selection, ...):
click lists options in one block, which at this many options is hard to read."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import click


class SectionedCommand(click.Command):
    """A command whose options are listed under headings: `sections` maps a heading to the names of
    the parameters under it, in order; options named in no section go under the first."""

    def __init__(self, *args, sections: Sequence[Tuple[str, Sequence[str]]] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sections = sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records: Dict[str, Tuple[str, str]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is not None:  # (the help option's own name is click's: it is keyed "help")
                records["help" if param.name and param.name.endswith("_help") else str(param.name)] = record
        placed = {name for _, names in self.sections for name in names}
        for index, (title, names) in enumerate(self.sections):
            rows: List[Tuple[str, str]] = [records[n] for n in names if n in records]
            if index == 0:
                rows += [record for name, record in records.items() if name not in placed]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
