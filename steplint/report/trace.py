"""`steplint trace`'s formats: a text tree (coloured on a terminal, as `check`'s), JSON, markdown."""

from __future__ import annotations

import json
from typing import List, Tuple

import click

from steplint.trace import SCHEMA_VERSION

UNIT_WORDS = {"batches": "batches", "windows": "attempted updates", "updates": "committed updates", "data": "data (samples/tokens)", "epochs": "epochs", "runs": "runs of the block it gates", "streak": "events in a row", "unknown": "unknown"}


def render_json(loops: List[dict]) -> str:
    return json.dumps({"version": SCHEMA_VERSION, "loops": loops}, indent=2) + "\n"


def _update_line(u: dict) -> str:
    via = f" via {u['via']}" if u["via"] else ""
    skip = {True: "may skip", False: "always commits", None: "skipping unknown"}[u["skippable"]]
    return f"{u['steps']}{via} `{u['code']}` (line {u['line']}): {skip}: {u['why']}; commit signal: {u['commit_signal']}"


def _window_line(w) -> str:
    if w is None:
        return "none"
    return f"`{w['boundary']}` (line {w['line']}), length {w['length'] or 'unknown'}"


def _counter_line(c: dict) -> str:
    source = "declared" if c["declared"] else "inferred"
    runtime = f"; StepCounters.{c['runtime']}" if c["runtime"] else ""
    lines = ", ".join(str(n) for n in c["incremented"])
    return f"{c['name']} (line {lines}): {UNIT_WORDS[c['unit']]}, {source}{runtime}"


def _consumer_line(c: dict) -> str:
    expects = f"expects {UNIT_WORDS[c['expects']]}" if c["expects"] else "follows the counter"
    return f"{c['kind']} `{c['code']}` (line {c['line']}): {expects}" + (": CONFLICT" if c["conflict"] else "")


def _scheduler_line(s: dict) -> str:
    position = {"told": ", told its position", "metric": ", on a metric"}.get(s["position"], "")
    cadence = f" (`{s['cadence']}`)" if s["cadence"] else ""
    return f"{s['name']} `{s['code']}` (line {s['line']}): stepped {s['stepped']}{cadence}, basis {s['basis']}{position}"


def _checkpoint_line(c: dict) -> str:
    if c["keys"] is None:
        return f"`{c['code']}` (line {c['line']}): contents not visible"
    stores = "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys in c["stores"].items()) or "no step state"
    return f"`{c['code']}` (line {c['line']}): keys {', '.join(c['keys']) or '-'} ({stores})"


def _resume_lines(r: dict) -> List[str]:
    needs = "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys in r["needs"].items() if keys) or "nothing"
    restores = ", ".join(f"`{x['code']}` (line {x['line']})" for x in r["restores"]) or "nothing"
    return [f"needs back: {needs}", f"restores: {restores}"]


def render_text(loops: List[dict]) -> str:
    out: List[str] = []

    def head(text: str) -> str:
        return click.style(text, bold=True)

    for loop in loops:
        out.append(f"{click.style(loop['file'], bold=True)}:{loop['line']}: {_title(loop)}")
        sections: List[Node] = []
        if loop["helpers"]:
            sections.append((f"{head('helpers')}: {', '.join(loop['helpers'])}", []))
        sections.extend((f"{head('update')}: {_update_line(u)}", []) for u in loop["updates"])
        sections.append((f"{head('window')}: {_window_line(loop['window'])}", []))
        sections.append((f"{head('counters')}{_none(loop['counters'])}", [_counter_node(c) for c in loop["counters"]]))
        sections.append((f"{head('schedulers')}{_none(loop['schedulers'])}", [(_scheduler_line(s), []) for s in loop["schedulers"]]))
        sections.append((f"{head('checkpoints')}{_none(loop['checkpoints'])}", [(_checkpoint_line(c), []) for c in loop["checkpoints"]]))
        sections.append((f"{head('resume')}", [(line, []) for line in _resume_lines(loop["resume"])]))
        sections.append((f"{head('diagnostics')}{_none(loop['diagnostics'])}", [
            (f"{click.style(d['code'], fg='red', bold=True)} line {d['line']}: {d['message']}", []) for d in loop["diagnostics"]
        ]))
        out.extend(_branches(sections, ""))
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


Node = Tuple[str, list]  # a line of the tree and the nodes under it


def _counter_node(c: dict) -> Node:
    children: List[Node] = []
    for e in c["evidence"]:
        name = " (name only)" if e["name_only"] else ""
        children.append((f"evidence: {e['why']} (line {e['line']}){name}", []))
    for consumer in c["consumers"]:
        text = _consumer_line(consumer)
        children.append((f"feeds {click.style(text, fg='red') if consumer['conflict'] else text}", []))
    if c["reported"]:
        children.append((f"reported: {click.style(', '.join(c['reported']), fg='red', bold=True)}", []))
    return _counter_line(c), children


def _branches(nodes: List[Node], indent: str) -> List[str]:
    """The lines of a tree: `├─` before every node but the last, `└─` before the last."""
    lines: List[str] = []
    for i, (text, children) in enumerate(nodes):
        last = i == len(nodes) - 1
        lines.append(f"{indent}{'└─' if last else '├─'} {text}")
        lines.extend(_branches(children, indent + ("   " if last else "│  ")))
    return lines


def render_markdown(loops: List[dict]) -> str:
    out: List[str] = []
    for loop in loops:
        out.append(f"### `{loop['file']}:{loop['line']}`: {_title(loop, '`')}\n")
        if loop["helpers"]:
            out.append(f"- **helpers:** {', '.join(loop['helpers'])}")
        for u in loop["updates"]:
            out.append(f"- **update:** {_update_line(u)}")
        out.append(f"- **window:** {_window_line(loop['window'])}")
        out.append(f"- **counters:**{_none(loop['counters'])}")
        for c in loop["counters"]:
            out.append(f"  - {_counter_line(c)}")
            out.extend(f"    - evidence: {e['why']} (line {e['line']})" for e in c["evidence"])
            out.extend(f"    - feeds {_consumer_line(x)}" for x in c["consumers"])
            if c["reported"]:
                out.append(f"    - reported: **{', '.join(c['reported'])}**")
        out.append(f"- **schedulers:**{_none(loop['schedulers'])}")
        out.extend(f"  - {_scheduler_line(s)}" for s in loop["schedulers"])
        out.append(f"- **checkpoints:**{_none(loop['checkpoints'])}")
        out.extend(f"  - {_checkpoint_line(c)}" for c in loop["checkpoints"])
        out.append("- **resume:** " + "; ".join(_resume_lines(loop["resume"])))
        if loop["diagnostics"]:
            out.append("\n| code | line | message |\n|---|---|---|")
            out.extend(f"| {d['code']} | {d['line']} | {_cell(d['message'])} |" for d in loop["diagnostics"])
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def _title(loop: dict, quote: str = "") -> str:
    function = f"{quote}{loop['function']}{quote}"
    return f"loop in {function}" if loop["kind"] == "loop" else f"step function {function} (one update per call)"


def _none(items: list) -> str:
    return "" if items else ": none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


FORMATS = {"text": render_text, "json": render_json, "markdown": render_markdown}
