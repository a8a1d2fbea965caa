"""Settings: which rules run, the default schedule basis, and how fixes add the commit gate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, Tuple

from steplint.rule import Rule, all_rules

DEFAULT_BASIS = "committed-updates"


class ConfigError(Exception):
    """A setting that cannot be honoured; the message names the key and where it came from."""


@dataclass(frozen=True)
class Settings:
    select: Tuple[str, ...] = ("ALL",)
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    schedule_basis: str = DEFAULT_BASIS
    fix_gate: str = "inline"  # "inline": add committed_step to the module; "import": from steplint.runtime

    def enabled_rules(self) -> Dict[str, Rule]:
        rules = all_rules()
        chosen = expand(self.select + self.extend_select, "select")
        dropped = expand(self.ignore, "ignore")
        return {code: r for code, r in rules.items() if code in chosen and code not in dropped}


def expand(selectors: Iterable[str], key: str) -> FrozenSet[str]:
    """Codes matched by selectors: full codes, prefixes like `SL1`, or `ALL`."""
    codes = set(all_rules())
    found = set()
    for selector in selectors:
        selector = selector.strip().upper()
        matched = codes if selector == "ALL" else {c for c in codes if c.startswith(selector)}
        if not matched or not selector.startswith("SL") and selector != "ALL":
            raise ConfigError(f"{key}: unknown rule code or prefix {selector!r}")
        found |= matched
    return frozenset(found)
