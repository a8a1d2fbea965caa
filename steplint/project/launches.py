"""How the project runs its scripts: the command-line options its launch files give each one.

A flag declared off by default (`add_argument("--fp16", action="store_true")`) is on in a run only
when the command line gives it, and the command lines we can read are the project's launch files:
shell and job scripts, READMEs and docs, configs, notebooks, Makefiles; and in its Python files, the
lines that run a script (a usage in a docstring, `os.system("python eval.py --fp16")`). A line that names a script
(`python train_ddp.py --amp`, `torchrun ... drivers/run_warmup.py`, `python -m pkg.train`) gives
that script the options written on it; a line that passes variables on (`$@`, `$ARGS`) may give it
any. A script no line names may be run with the options of lines that name no script of the project (a
README that says "add --fp16", a wrapper `bash run.sh --amp`, a command for a script since renamed), not
with those of lines that name another of its scripts: those are that script's options. Config files tell which keys they set true (`amp: true`), for a script that
copies a config into its options, and which keys they only ever set false (`train: {fp16_run: false}`):
a run reads such a key (`hps.train.fp16_run`) as false, unless a launch line sets it
(`train.fp16_run=true`, as Hydra takes it) or the project's code does (`fp16_run=True`).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from steplint.effects import ACCELERATE_PRECISION, ANY_OPTION, PRECISION_KEY
from steplint.files import SKIPPED_DIRS

LAUNCH_SUFFIXES = (".sh", ".bash", ".zsh", ".md", ".rst", ".txt", ".yaml", ".yml", ".json", ".cfg", ".ini", ".toml", ".ipynb", ".slurm",
                   ".sbatch", ".job", ".pbs", ".bat", ".cmd", ".ps1")
LAUNCH_NAMES = ("Makefile", "makefile", "Dockerfile", "Justfile", "justfile", "Procfile")
MAX_LAUNCH_FILES = 2000
MAX_LAUNCH_BYTES = 1_000_000
MAX_LAUNCH_TOTAL_BYTES = 16_000_000  # read in all: a tree full of data files is not read whole
_PRIORITY = {".md": 1, ".rst": 1, ".txt": 2, ".ipynb": 2, ".yaml": 3, ".yml": 3, ".json": 4, ".cfg": 3, ".ini": 3, ".toml": 3}

_CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".cfg", ".ini", ".toml")
# A Python module of settings, by its name or its folder: `monotransquest_config.py`, `configs/base.py`, `cfg.py`
_PYTHON_CONFIG = re.compile(r"(?:^|/)(?:[^/]*config[^/]*|cfg|[^/]*_cfg|hparams)\.py$|(?:^|/)configs?/[^/]+\.py$")
_DOC_SUFFIXES = (".md", ".rst", ".txt")
_SET_TRUE = re.compile(r"""^[ \t]*["']?([A-Za-z_][\w-]*)["']?[ \t]*[:=][ \t]*(?:true|True|TRUE|yes|Yes|on|1)\b""", re.M)
_TRUE_WORDS = ("true", "yes", "on", "1")
_FALSE_WORDS = ("false", "no", "off", "0", "null", "none", "~", "")
_YAML_KEY = re.compile(r"""^([ \t]*)["']?([A-Za-z_][\w-]*)["']?[ \t]*[:=][ \t]*([^#\n]*)""")
_YAML_TAG = re.compile(r"^!!\w+\s+")  # a YAML type tag before a value (`enable_amp: !!bool False`)
_SECTION = re.compile(r"^[ \t]*\[+[ \t]*([\w.-]+)[ \t]*\]+")
# `key=true` as a word of a launch line (Hydra's `++train_conf.use_fp16=true`), or set true in the code
# (`fp16_run=True`, `cfg.amp = True`, `config["amp"] = True`): found by the value, then the key before it
# (led by a literal: 15x faster than one pattern that starts at every word)
_TRUE_VALUE = re.compile(r"=[ \t]*(?:true|True|1|not)\b")  # (`amp = not args.no_amp`: true unless what it negates is set)
_KEY_BEFORE = re.compile(r"""([A-Za-z_][\w-]*)["']?\]?(?:[ \t]*:[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?)?[ \t]*$""")  # (also `amp: bool = True`)
# ...and as a dict entry (`{"fp16": True}`), or an argparse option that is on unless a run turns it off
_FIELD_TRUE = re.compile(r"^[ \t]+([A-Za-z_]\w*)[ \t]*:[ \t]*bool[ \t]*=[ \t]*True\b", re.M)  # a class field's default (`fp16: bool = True`)
_TRUE_ENTRY = re.compile(r"""["']([A-Za-z_][\w-]*)["'][ \t]*:[ \t]*(?:true|True)\b""")
_TRUE_OPTION = re.compile(
    r"""add_argument\(\s*["']--?([A-Za-z_][\w-]*)["'][^()]*?(?:\bdefault[ \t]*=[ \t]*True\b|["']store_false["'])"""
    r"""|DEFINE_bool(?:ean)?\(\s*["']([A-Za-z_][\w-]*)["'][ \t]*,\s*(?:default[ \t]*=[ \t]*)?True\b"""  # (absl: `flags.DEFINE_bool("apex", default=True, ...)`)
)
# The keys that may switch loss scaling on, among those set true (the rest says nothing about it)
_SWITCH = re.compile(r"amp|fp16|bf16|half|precision|mixed|scal|autocast|float16|apex|enable", re.I)
# A key the code copies from another (`config.AMP = args.amp`, `cfg["fp16"] = opt.fp16`): on when its source may be
_COPIED = re.compile(r"""^[ \t]*[A-Za-z_][\w.]*?(?:\.([A-Za-z_]\w*)|\[["']([A-Za-z_][\w-]*)["']\])[ \t]*=[ \t]*[A-Za-z_]\w*(?:\.\w+|\[["'][\w-]+["']\])*?(?:\.([A-Za-z_]\w*)|\[["']([A-Za-z_][\w-]*)["']\])[ \t]*(?:#[^\n]*)?$""", re.M)
_ACCELERATE_PRECISION = re.compile(r"""--mixed[_-]precision(?:=|[ \t]+)["']?([A-Za-z0-9]+)""")
_RUNNER = re.compile(r"\b(?:python[\d.]*|torchrun|accelerate|deepspeed|srun|mpirun|horovodrun)\b")
_CONFIG_NAMED = re.compile(r"""(?<![\w./-])([\w./-]+\.(?:ya?ml|json))\b""")  # a config file a launch line names (`--config conf/dino.yaml`)
_ASSIGNED_KEY = re.compile(r"""(?:\.|\[["'])([\w-]+)["']?\]?[ \t]*=(?!=)""")  # an attribute or key assigned (`cfg.amp_dtype = `)
_TOP_LEVEL_SET = re.compile(r"^([A-Za-z_]\w*)[ \t]*=[ \t]*([^\n#=][^\n#]*)", re.M)
_CONTINUED = re.compile(r"\\\r?\n|\\\\n")  # a shell line continued (also as written inside a notebook's JSON)
_SCRIPT = re.compile(r"([\w./-]*\w)\.py\b")
_MODULE = re.compile(r"-m\s+([A-Za-z_][\w.]*)")
_OPTION = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
_ASSIGNED = re.compile(r"\s*(?:export\s+)?([A-Za-z_]\w*)=(\"[^\"`]*\"|'[^']*'|[^\s$`;|&]*)\s*(?:#.*)?$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
_PASSED_ON = re.compile(r"\$\{?[@*A-Za-z_]")  # a variable (at the start of a token): `$@`, `${@:3}`, `$ARGS`
# A command line that runs a program other than Python or a launcher of it (its options are that program's)
_OTHER_PROGRAM = re.compile(
    r"^[\s(]*(?:(?:if|then|else|do|sudo|RUN|!)\s+)*(?:[A-Za-z_]\w*=\S*\s+)*(?:[A-Za-z_]\w*=)?(?:\$\(\s*)?"
    r"(?:pip3?|conda|mamba|apt(?:-get)?|brew|git|wget|curl|nvidia-smi|tensorboard|docker|huggingface-cli|gsutil|aws|gcloud|rsync|scp|ssh|"
    r"tar|unzip|cat|find|grep|sed|awk|ls|cp|mv|rm|mkdir|chmod|parallel|numfmt|node|npm|yarn|kill|pkill|pgrep|ps|du|df|nproc|sort|head|tail|wc|xargs)\b"
)
# A list of words with a Python file among them, no brackets inside: a command to run (`["python", "train.py", "--amp"]`)
_WORD_LIST = re.compile(r"""\[((?:[^\[\]"']|"[^"\n]*"|'[^'\n]*')*?["'][^"'\n]*\.py["'](?:[^\[\]"']|"[^"\n]*"|'[^'\n]*')*)\]""")
_QUOTED = re.compile(r"""f?(["'])([^"'\n]*)\1""")
_PRINTS = re.compile(r"^\s*(?:echo|printf)\b")
_BUNDLE = re.compile(r"^\$\{?(?:[@*]|\w*(?:ARG|OPT|FLAG|PARAM|EXTRA|CMD))", re.I)  # a variable named as options: never an option's value
_SHELL_SCRIPT = re.compile(r"(?<![\w./-])([\w./-]*\w\.sh)\b")  # a shell script a line runs (`bash tools/dist_train.sh`)


@dataclass
class Launches:
    """Options by the script a launch line names, and every option the launch files mention."""

    by_script: Dict[str, List[Tuple[str, Set[str]]]] = field(default_factory=dict)  # file name -> (path as written, options) per line
    values_by_script: Dict[str, List[Tuple[str, Dict[str, Optional[str]]]]] = field(default_factory=dict)  # ... and the value each option is given (None: a variable)
    mentioned: Set[str] = field(default_factory=set)
    modules: Optional[Set[str]] = None  # the project paths of the Python files under the root (None: not known, every line may name one)
    configs: "ConfigKeys" = field(default_factory=lambda: ConfigKeys())  # what the project's config files set, all of them
    assigned_in_code: Set[str] = field(default_factory=set)  # attributes and keys the project's code assigns (`cfg.amp_dtype = ...`)
    launch_true: Set[str] = field(default_factory=set)  # last keys a launch line sets true (`++train.use_fp16=true`)
    set_in_code: Set[str] = field(default_factory=set)  # last keys the project's code sets true (`cfg.amp = True`)
    declared_true: Set[str] = field(default_factory=set)  # options the project's code declares true by default (`add_argument("--amp", default=True)`)
    copied: Dict[str, Set[str]] = field(default_factory=dict)  # key -> the keys the code copies it from (`config.AMP = args.amp`)
    config_files: Dict[str, "ConfigKeys"] = field(default_factory=dict)  # project path of a config file -> what it sets
    configs_named: Dict[str, List[Tuple[str, List[str]]]] = field(default_factory=dict)  # script file name -> (path as written, config files the line names) per line
    forwarded: Dict[str, List[Set[str]]] = field(default_factory=dict)  # shell script name -> the options of its lines that pass their own arguments on (`${@:3}`)
    switches_reached: Dict[str, Set[str]] = field(default_factory=dict)  # module -> the switches given to the scripts that import it (note_imports)
    run_inside: Dict[str, Set[str]] = field(default_factory=dict)  # module -> the scripts lines name that it runs inside of, and only them (note_importers)
    wrapper_calls: Dict[str, List[Set[str]]] = field(default_factory=dict)  # shell script name -> the options of each line that runs it (`bash dist_train.sh cfg 8 --fp16`)

    def switched_off(self, configs: Optional["ConfigKeys"] = None) -> List[str]:
        """Key paths the config files (`configs`: those a script's launches name) set, each time, to false,
        and nothing sets true."""
        on = self.switched_on(configs)
        return sorted(p for p in (configs or self.configs).config_false if p.rsplit(".", 1)[-1].replace("-", "_") not in on)

    def configured_values(self, configs: Optional["ConfigKeys"] = None) -> Dict[str, List[str]]:
        """Precision key paths (`train.amp_dtype`), and keys set to numbers, -> the values the config files
        (`configs`: those a script's launches name) give them, for the keys no launch line gives and no code
        of the project assigns: what the run reads is one of those values."""
        found, on = {}, self.switched_on(configs)  # (a key some file, launch or code sets true, by name, as `switched_off`)
        configs = configs or self.configs
        for path, words in sorted(configs.config_values.items()):
            key = path.rsplit(".", 1)[-1].replace("-", "_")
            if key not in self.mentioned and key not in self.assigned_in_code and key not in on:
                found[path] = sorted(words)
        # Numbers too (`TRAIN.ACCUMULATION_STEPS: 1`, `_C.TRAIN.ACCUMULATION_STEPS = 0`), for the keys no launch line
        # mentions and no code sets or copies from one (`config.TRAIN.ACCUMULATION_STEPS = args.accumulation_steps`)
        # (a literal the code writes, the default `_C.TRAIN.ACCUMULATION_STEPS = 1`, is one of the numbers read)
        mentioned = {key.lower() for key in self.mentioned}
        elsewhere = {key.lower() for key in self.launch_true | self._copied_from(self.launch_true | self.mentioned)}
        for path, words in sorted(configs.numbers.items()):
            key = path.rsplit(".", 1)[-1].replace("-", "_").lower()
            if key not in mentioned and key not in elsewhere:
                found[path] = sorted(words)
        return found

    globals_set: Dict[str, Set[str]] = field(default_factory=dict)  # global -> each value the project's config modules set it to, as written
    own_globals: Dict[str, Dict[str, Set[str]]] = field(default_factory=dict)  # a script that runs a configurator -> the values it sets its globals to
    _shared: Optional[Dict[str, List[str]]] = None  # the context fields every module shares (computed once, after the notes)
    free: Set[str] = field(default_factory=set)  # options of the lines that name no script (any script may be run with them)
    _unclaimed: Optional[Set[str]] = None  # the options a script no line names may be given (computed once)
    _contested: Optional[Set[str]] = None  # the globals the config modules set to more than one value (computed once)
    _named: Dict[str, Set[str]] = field(default_factory=dict)  # a config file name as a launch line writes it -> the project's files it may be

    def note_code(self, text: str, globals_: bool = True) -> None:
        """The keys a module of the project sets true in its code (a config's defaults, an override), and
        (`globals_`) the values its top level gives globals (`dtype = 'float16'` in a config file run by `exec`)."""
        self.note_code_notes(code_notes(text), globals_)

    def note_code_notes(self, notes: "CodeNotes", globals_: bool = True) -> None:
        """note_code, from what a module's code tells (read once per text: `code_notes`)."""
        self._shared = self._unclaimed = self._contested = None
        self.set_in_code.update(notes.set_true)
        self.declared_true.update(notes.declared_true)
        self.assigned_in_code.update(notes.assigned)
        for target, source in notes.copied:
            self.copied.setdefault(target, set()).add(source)
        for name, value in notes.top_level if globals_ else ():
            self.globals_set.setdefault(name, set()).add(value)
        if notes.commands:
            add_launch_text(self, notes.commands, keys=False)

    def switched_on(self, configs: Optional["ConfigKeys"] = None) -> Set[str]:
        """Keys some config, launch line or code sets true, or that the code copies from a key a launch
        or config turns on (`config.AMP = args.amp` with `--amp` in train.sh), or from another such copy.
        (A key the code alone sets true, `amp = True` in a script that writes configs, is read by its
        name only: evidence for the key itself, not for what copies it.)"""
        configs = configs or self.configs
        set_true = self.launch_true | configs.set_true
        copies_on = self._copied_from(set_true | configs.configured | self.mentioned)
        # (a default is what a run takes when nothing sets the option: where the config files set the key, and each
        # to false, the runs take it from them, as scripts that copy a config onto their parsed options do)
        set_false = {p.rsplit(".", 1)[-1].replace("-", "_") for p in configs.config_false}
        declared = {key for key in self.declared_true if key not in set_false or key in configs.configured}
        return set_true | configs.configured | self.set_in_code | declared | copies_on

    def _copied_from(self, evidence: Set[str]) -> Set[str]:
        """The keys the code copies from one of `evidence`, or from another such copy."""
        copies_on: Set[str] = set()
        pending = True
        while pending:  # (chains of copies: each round adds at least one key, or ends)
            pending = [key for key, sources in self.copied.items() if key not in copies_on and sources & (evidence | copies_on)]
            copies_on.update(pending)
        return copies_on

    def note_own_globals(self, relative: str, notes: "CodeNotes") -> None:
        """The globals a script that runs a configurator sets (`dtype = "bfloat16"`): its own defaults, which
        the config files it may run override, not those of the project's other scripts."""
        for name, value in notes.top_level:
            self.own_globals.setdefault(relative, {}).setdefault(name, set()).add(value)

    def contested_globals(self, relative: Optional[str] = None) -> List[str]:
        """Globals the project's config modules, with the module at `relative` itself, set to more than one value."""
        own = self.own_globals.get(relative, {}) if relative is not None else {}
        if self._contested is None:  # (what the config modules alone contest: once)
            self._contested = {name for name, values in self.globals_set.items() if len(values) > 1}
        return sorted(self._contested | {name for name, values in own.items() if len(values | self.globals_set.get(name, set())) > 1})

    def options_for(self, relative: str) -> List[str]:
        """The options a run of the module at `relative` (a project path) may be given: those of the
        lines that name it; for a module that runs only inside scripts lines name (`note_importers`),
        theirs; else those of the lines that name no script of the project. Sorted, `-` written `_`."""
        given = self._given(relative)
        if given is not None:
            return sorted(given)
        inside = self.run_inside.get(relative)
        if inside:
            return sorted(set().union(*map(self._given, inside)))
        return sorted(self.options_for_unnamed_scripts())

    def options_for_unnamed_scripts(self) -> Set[str]:
        """The options of the lines that name no script of the project, which a script no line names may be given."""
        if self._unclaimed is None:
            self._unclaimed = self._unclaimed_options()
        return self._unclaimed

    def _given(self, relative: str) -> Optional[Set[str]]:
        """The options of the lines that name the module at `relative`; None when none names it."""
        found = [options for written, options in self.by_script.get(posixpath.basename(relative), ()) if _same_file(written, relative)]
        return set().union(*found) if found else None

    def note_importers(self, imports: Dict[str, Iterable[str]], scripts: Set[str]) -> None:
        """With the project's imports (module -> the modules it imports) and its scripts (the modules with a
        `__main__` block): a module that is no script, and that only scripts lines name import (directly or
        not), runs inside their runs, with their options, not with those of lines that name no script (a
        README's "add --amp" is for a script no line names). Walked once from each script."""
        running: Dict[str, Set[str]] = {}  # module -> the scripts that import it, directly or not
        for script in scripts & set(imports):
            for module in _reached(imports, script):
                running.setdefault(module, set()).add(script)
        self.run_inside = {module: inside for module, inside in running.items()
                           if module not in scripts and self._given(module) is None and all(self._given(script) is not None for script in inside)}

    def _unclaimed_options(self) -> Set[str]:
        """The options of the launch lines that name no script of the project: prose and wrappers that
        name none, and commands for scripts the project does not have (`python -m torch.distributed.launch
        train.py --fp16` names train.py too: its options are train.py's)."""
        found = set(self.free)
        by_name: Dict[str, List[str]] = {}
        for module in self.modules or ():
            by_name.setdefault(posixpath.basename(module), []).append(module)
        lines: Dict[int, list] = {}  # id of a line's options (one set per line, shared by the scripts it names) -> [options, claimed]
        for name, entries in self.by_script.items():
            for written, options in entries:
                line = lines.setdefault(id(options), [options, False])
                line[1] = line[1] or self.modules is not None and any(_same_file(written, module) for module in by_name.get(name, ()))
        for options, claimed in lines.values():
            if not claimed:
                found |= options - {ANY_OPTION}
        return found

    def option_values_for(self, relative: str) -> Optional[List[Dict[str, Optional[str]]]]:
        """The options each launch line that names the module at `relative` gives it, with their values
        as written (`""` for a flag, None for a variable); None when no line names it."""
        name = posixpath.basename(relative)
        lines = [values for written, values in self.values_by_script.get(name, ()) if _same_file(written, relative)]
        return lines or None

    def context_of(self, relative: str) -> Dict[str, object]:
        """The launch fields of the module's ModuleContext. A script whose every launch line names config
        files of the project is read without the configs only other scripts are launched with."""
        if self._shared is None:  # (the same for every module: computed once per index)
            self._shared = self._config_fields(None)
        configs = self.configs_for(relative)
        fields = self._shared if configs is None else self._config_fields(configs)
        return {"launch_options": self.options_for(relative), "launch_values": self.option_values_for(relative),
                "switches_given_to_scripts": sorted(self.switches_reached.get(relative, ())),
                **{name: dict(value) if isinstance(value, dict) else list(value) for name, value in fields.items()},
                "contested_globals": self.contested_globals(relative)}

    def _config_fields(self, configs: Optional["ConfigKeys"]) -> Dict[str, List[str]]:
        return {"configured_options": sorted((configs or self.configs).configured), "switched_off_keys": self.switched_off(configs),
                "switches_set_true": sorted(k for k in self.switched_on(configs) if _SWITCH.search(k)),
                "configured_values": self.configured_values(configs), "precisions_configured": self.precisions_configured(configs),
                "precision_keys_configured": self.precision_keys_configured(configs)}

    def precision_keys_configured(self, configs: Optional["ConfigKeys"] = None) -> Dict[str, List[str]]:
        """The name of each precision key a config file gives a value, whatever else sets it -> those values."""
        found: Dict[str, Set[str]] = {}
        for path, words in (configs or self.configs).config_values.items():
            found.setdefault(path.rsplit(".", 1)[-1], set()).update(words)
        return {key: sorted(words) for key, words in sorted(found.items())}

    def precisions_configured(self, configs: Optional["ConfigKeys"] = None) -> List[str]:
        """Every value a config file gives a key named `precision` (Lightning's `trainer: {precision: 16-mixed}`),
        whatever else sets it: a run with that config file trains in it."""
        configs = configs or self.configs
        return sorted({word for path, words in configs.config_values.items() if path.rsplit(".", 1)[-1] == "precision" for word in words})

    def switches_given_to_scripts(self) -> Set[str]:
        """The loss-scaling switches launch lines give the scripts they name (`train.py --fp16`)."""
        return {option for entries in self.by_script.values() for _, options in entries for option in options if _SWITCH.search(option)}

    def note_imports(self, imports: Dict[str, Iterable[str]]) -> None:
        """With the project's imports (module -> the modules it imports): the loss-scaling switches the lines that
        name a script give it reach the modules it imports, directly or not, as the options it hands them
        (`Trainer(args)` in engine.py, `self.args.fp16`). Walked once from each such script."""
        self.switches_reached = {}
        for script in imports:
            given = {option for option in self._given(script) or () if option != ANY_OPTION and _SWITCH.search(option)}
            for module in _reached(imports, script) if given else ():
                self.switches_reached.setdefault(module, set()).update(given)

    def _config_files_named(self, name: str) -> Set[str]:
        """The config files of the project a launch line's `name` (`configs/ljs.json`) may be (memoised:
        every launched module asks again of every line)."""
        if name not in self._named:
            self._named[name] = {path for path in self.config_files if _same_file(name, path)}
        return self._named[name]

    def configs_for(self, relative: str) -> Optional["ConfigKeys"]:
        """What the config files that may configure the script at `relative` set, when each of its launch
        lines names config files of the project: every config file but those only other scripts' launch
        lines name (`train_ms.py -c configs/vctk.json` claims vctk.json from `train.py`). None otherwise,
        or when no config is claimed away (every config file may apply)."""
        lines = [named for written, named in self.configs_named.get(posixpath.basename(relative), ()) if _same_file(written, relative)]
        here = [{path for name in named for path in self._config_files_named(name)} for named in lines]
        if not lines or not all(here):
            return None
        elsewhere = {path for entries in self.configs_named.values() for written, named in entries
                     if not _same_file(written, relative) for name in named for path in self._config_files_named(name)}
        claimed = elsewhere - set().union(*here)
        if not claimed:
            return None
        merged = ConfigKeys()
        for path in sorted(set(self.config_files) - claimed):
            merged.merge(self.config_files[path])
        return merged


@dataclass
class ConfigKeys:
    """What config files set: keys set true (by pattern and by path), key paths set false, and the
    values of precision keys."""

    configured: Set[str] = field(default_factory=set)  # keys a config file sets true (`amp: true`, `"fp16": true`)
    set_true: Set[str] = field(default_factory=set)  # last keys a config file sets true
    config_false: Set[str] = field(default_factory=set)  # dotted key paths the config files set false (`train.fp16_run`)
    config_values: Dict[str, Set[str]] = field(default_factory=dict)  # precision key path -> each value the config files give it (`train.amp_dtype`: fp32)
    numbers: Dict[str, Set[str]] = field(default_factory=dict)  # path of another key set to a number -> each number (`TRAIN.ACCUMULATION_STEPS`: 0)

    def merge(self, other: "ConfigKeys") -> None:
        self.configured |= other.configured
        self.set_true |= other.set_true
        self.config_false |= other.config_false
        for path, words in other.config_values.items():
            self.config_values.setdefault(path, set()).update(words)
        for path, words in other.numbers.items():
            self.numbers.setdefault(path, set()).update(words)


def _reached(imports: Dict[str, Iterable[str]], start: str) -> Set[str]:
    """The modules `start` imports, directly or not (itself left out)."""
    seen: Set[str] = set()
    pending = [start]
    while pending:
        for target in imports.get(pending.pop(), ()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen - {start}


def is_python_config(relative: str) -> bool:
    """A Python module of settings, by its name or its folder (`configs/base.py`, `cfg.py`): what a configurator runs."""
    return _PYTHON_CONFIG.search(relative) is not None


def _beside(root: str, folder: str, written: str) -> str:
    """`written` (`train.py`, `../tools/train.py`) as the path of the file in the launch file's `folder`, when
    there is one there; else as written (a script in `scripts/` that runs `python train.py` from the root)."""
    if not folder or written.startswith(("/", "~", "$")):
        return written
    candidate = posixpath.normpath(posixpath.join(folder, written))
    return candidate if not candidate.startswith("..") and os.path.isfile(os.path.join(root, candidate)) else written


def _same_file(written: str, relative: str) -> bool:
    """A script as a launch line writes it (`../drivers/run_ann.py`, `train.py`) is the project's
    `relative` when the folders it gives end the project path (`..` and `.` say nothing)."""
    parts = [p for p in written.split("/") if p not in ("", ".", "..")]
    return relative.split("/")[-len(parts):] == parts


def read_launches(root: str) -> Launches:
    """The launch facts of the project under `root` (its launch files, default-excluded folders skipped)."""
    found = Launches()
    budget = MAX_LAUNCH_TOTAL_BYTES
    # Scripts first, then docs, then configs: a tree of data files (`.json` annotations) uses up the
    # budget, not the scripts' command lines.
    paths, found.modules = _launch_files(root)
    paths += [os.path.join(root, module) for module in sorted(found.modules or ()) if is_python_config(module)]
    for path in sorted(paths, key=lambda p: _PRIORITY.get(os.path.splitext(p)[1], 0)):
        try:
            size = os.path.getsize(path)
            if size > MAX_LAUNCH_BYTES or size > budget:
                continue
            budget -= size
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        if path.endswith(".py"):  # (a Python config module: its dicts and classes of settings)
            keys = ConfigKeys()
            _read_python_config(keys, text)
            found.config_files[os.path.relpath(path, root).replace(os.sep, "/")] = keys
            found.configs.merge(keys)
            continue
        config = path.endswith(_CONFIG_SUFFIXES)
        add_launch_text(found, text, keys=not config, docs=path.endswith(_DOC_SUFFIXES), wrapper=os.path.basename(path) if path.endswith(".sh") else None,
                        beside=functools.partial(_beside, root, os.path.dirname(os.path.relpath(path, root)).replace(os.sep, "/")))
        if config:  # (what it sets true is its own, for the scripts launched with it)
            keys = ConfigKeys(configured={m.group(1).replace("-", "_") for m in _SET_TRUE.finditer(text)}, set_true=keys_set_true(text))
            _read_config_keys(keys, text, path.endswith(".json"))
            found.config_files[os.path.relpath(path, root).replace(os.sep, "/")] = keys
            found.configs.merge(keys)
    _resolve_wrappers(found)
    return found


def _resolve_wrappers(found: Launches) -> None:
    """A shell script's line that passes its own arguments on (`main.py --cfg $CFG ${@:3}` after a runner) gives the
    options the lines that run the script give it (`bash dist_pretrain.sh cfg.yaml 16 --batch-size 128`),
    when some line does and none passes arguments on in turn; else any option, as before."""
    for wrapper, lines in found.forwarded.items():
        calls = found.wrapper_calls.get(wrapper, [])
        if not calls or any(ANY_OPTION in options for options in calls):
            continue
        given = set().union(*calls)
        for options in lines:  # (the sets by_script holds: changed in place)
            options.discard(ANY_OPTION)
            options |= given


def keys_set_true(text: str, declarations: bool = True) -> Set[str]:
    """The keys `text` sets true as `key=true`, `key = True`, `amp: bool = True`, `cfg["key"] = 1`,
    `{"key": True}`, `args["amp"] = not args["no_amp"]`, or (`declarations`) declares true (`add_argument("--key", default=True)`); `-` written `_`."""
    found = set()
    for match in _TRUE_VALUE.finditer(text):
        if text[match.start() - 1:match.start()] not in ("=", "!", "<", ">"):  # (not `==`, `!=`, `<=`, `>=`)
            key = _KEY_BEFORE.search(text, max(0, match.start() - 100), match.start())
            if key is not None:
                found.add(key.group(1).replace("-", "_"))
    found.update(m.group(1).replace("-", "_") for m in _TRUE_ENTRY.finditer(text))
    return found | _declared_true(text) if declarations else found


def _declared_true(text: str) -> Set[str]:
    return {(m.group(1) or m.group(2)).replace("-", "_") for m in _TRUE_OPTION.finditer(text)}


@dataclass
class CodeNotes:
    """What one module's code tells the launch facts, read off its text once (and cached with it)."""

    set_true: List[str]  # keys it sets true (`cfg.amp = True`), or a settings class declares true (`fp16: bool = True`)
    declared_true: List[str]  # options it declares true by default (`add_argument("--amp", default=True)`), and such fields
    assigned: List[str]  # the attributes and keys it assigns (`cfg.amp_dtype = ...`, `config["amp_dtype"] = ...`)
    copied: List[Tuple[str, str]]  # (key, the key it copies it from): `config.AMP = args.amp`
    top_level: List[Tuple[str, str]]  # (global, value as written) its top level sets
    commands: str  # the lines that run a script (a usage in a docstring, `os.system("python eval.py --fp16")`)

    @classmethod
    def from_dict(cls, data: dict) -> "CodeNotes":
        return cls(data["set_true"], data["declared_true"], data["assigned"], [tuple(p) for p in data["copied"]],
                   [tuple(p) for p in data["top_level"]], data["commands"])


def code_notes(text: str) -> CodeNotes:
    # (a settings class's field default, `fp16: bool = True`, is a declared default, as an option's:
    # config files that set the key false win over it)
    fields = [m.group(1) for m in _FIELD_TRUE.finditer(text)]
    copied = []
    for match in _COPIED.finditer(text):
        target, source = match.group(1) or match.group(2), match.group(3) or match.group(4)
        if target != source:  # (`config.TRAIN.ACCUMULATION_STEPS = args.accumulation_steps`: any key a launch may set)
            copied.append((target.replace("-", "_"), source.replace("-", "_")))
    top_level = [(m.group(1), m.group(2).strip().replace('"', "'")) for m in _TOP_LEVEL_SET.finditer(text)]
    commands = ""
    if ".py" in text:  # (a usage in a docstring or comment, a command the code runs: `python train.py --fp16`)
        lines = _CONTINUED.sub(" ", text).splitlines() + _listed_commands(text)
        commands = "\n".join(line for line in lines if ".py" in line and _RUNNER.search(line) and _SCRIPT.search(line))
    return CodeNotes(
        sorted(keys_set_true(_FIELD_TRUE.sub("", text), declarations=False)), sorted(_declared_true(text) | set(fields)),
        sorted({m.group(1) for m in _ASSIGNED_KEY.finditer(text)}), copied, top_level, commands,
    )


def _listed_commands(text: str) -> List[str]:
    """The commands a module runs as a list of words (`subprocess.run(["accelerate", "launch", "train.py",
    "--checkpointing_steps", "25000"])`), each as one line: its quoted words in order (a name between them,
    a value computed at run time, is left out)."""
    return [" ".join(word for _, word in _QUOTED.findall(body)) for body in _WORD_LIST.findall(text)]


def _note_config_value(found: "ConfigKeys", path: str, value: object, typed: bool) -> None:
    """Note what a config sets `path` to (`typed`: a parsed value, where None is no value, not false)."""
    word = str(value).strip().strip("\"'").lower()
    key, number = path.rsplit(".", 1)[-1], _number(word)
    # (`ACCUMULATION_STEPS: 4` is as true as a switch set on; a precision's number, `mixed_dtype: 16`, is one of its values)
    if word in _TRUE_WORDS or number and not PRECISION_KEY.search(key):
        found.set_true.add(key.replace("-", "_"))
    elif (word in _FALSE_WORDS or number == 0.0) and (value is not None or not typed):
        found.config_false.add(path)
    if not PRECISION_KEY.search(key) and (type(value) in (int, float) or not typed and number is not None):
        found.numbers.setdefault(path, set()).add(json.dumps(value) if typed else word)
    if PRECISION_KEY.search(key) and (value is not None or not typed):
        # (as written, quotes kept: `fp16` and `FP16`, `16` and `"16"` are other values to the code that compares them)
        written = json.dumps(value) if typed else str(value).strip()
        found.config_values.setdefault(path, set()).add(written)


def _read_python_config(found: "ConfigKeys", text: str) -> None:
    """The settings a Python config module writes as literals: `train_config = {"fp16": False, ...}` and
    `class CFG: amp = False` (and `dict(fp16=False)`) at its top level, by key path (`train_config.fp16`, `CFG.amp`)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return
    pending: List[Tuple[str, ast.AST]] = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            pending.append((statement.targets[0].id + ".", statement.value))
        elif (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and (path := _attribute_path(statement.targets[0]))
              and isinstance(statement.value, ast.Constant) and type(statement.value.value) in (int, float)):
            # (a number a yacs-style module sets, `_C.TRAIN.ACCUMULATION_STEPS = 0`; its switches, `config.resume = False`,
            # stay what a user edits in the file: the code reads them as it did)
            pending.append((path + ".", statement.value))
        elif isinstance(statement, ast.ClassDef):
            pending.extend((f"{statement.name}.{s.targets[0].id}.", s.value) for s in statement.body
                           if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name))
            # (a settings dataclass's field default, `grad_accumulation: int = 1`: what a run takes unless a config sets it)
            pending.extend((f"{statement.name}.{s.target.id}.", s.value) for s in statement.body
                           if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None)
    while pending:
        prefix, value = pending.pop()
        if isinstance(value, ast.Dict):
            pending.extend((f"{prefix}{k.value}.", v) for k, v in zip(value.keys, value.values) if isinstance(k, ast.Constant) and isinstance(k.value, str))
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":  # (`optimizer = dict(lr=1e-4, ...)`)
            pending.extend((f"{prefix}{k.arg}.", k.value) for k in value.keywords if k.arg is not None)
        elif isinstance(value, ast.Constant) and "." in prefix[:-1] and (isinstance(value.value, (bool, str)) or type(value.value) in (int, float)):
            if value.value is True:
                found.configured.add(prefix[:-1].rsplit(".", 1)[-1])
            if isinstance(value.value, bool) or type(value.value) in (int, float) or PRECISION_KEY.search(prefix[:-1].rsplit(".", 1)[-1]):
                _note_config_value(found, prefix[:-1], value.value, typed=True)


def _attribute_path(target: ast.AST) -> Optional[str]:
    """`_C.TRAIN.AMP` of an assignment to an attribute of a module-level name, as a key path."""
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    return ".".join([target.id] + parts[::-1]) if isinstance(target, ast.Name) and parts else None


def _read_config_keys(found: "ConfigKeys", text: str, is_json: bool) -> None:
    """The key paths a config file sets true or false (JSON parsed; YAML, TOML, INI read by their
    indentation and sections)."""
    def note(path: str, value: object) -> None:
        _note_config_value(found, path, value, is_json)

    if is_json:
        try:
            data = json.loads(text)
        except ValueError:
            return
        pending = [("", data)]
        while pending:
            prefix, value = pending.pop()
            if isinstance(value, dict):
                pending.extend((f"{prefix}{k}.", v) for k, v in value.items() if isinstance(k, str))
            elif isinstance(value, bool) or type(value) in (int, float):
                note(prefix[:-1], value)
            elif isinstance(value, (str, int, float)) and PRECISION_KEY.search(prefix[:-1].rsplit(".", 1)[-1]):
                note(prefix[:-1], value)
        return
    parents: List[Tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    section = ""
    empty: Optional[Tuple[int, str]] = None  # (indent, path) of a key with no value: a mapping, or null if nothing nests in it
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section, parents = header.group(1) + ".", []
            continue
        match = _YAML_KEY.match(line)
        if not match:
            continue
        indent, key, value = len(match.group(1).expandtabs()), match.group(2), _YAML_TAG.sub("", match.group(3).strip())
        if empty is not None and indent <= empty[0]:
            note(empty[1], "")  # (`resume:  # path to latest checkpoint`: null)
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = section + "".join(f"{k}." for _, k in parents) + key
        empty = None
        if value:
            note(path, value)
        else:
            parents.append((indent, key))
            empty = (indent, path)
    if empty is not None:
        note(empty[1], "")


def _number(word: str) -> Optional[float]:
    """`4`, `0.`, `0e0`: the number a config value is (zero is false as a switch: `max_norm: 0.`); None for a word."""
    try:
        return float(word)
    except ValueError:
        return None


def add_launch_text(found: Launches, text: str, keys: bool = True, docs: bool = False, wrapper: Optional[str] = None,
                    beside: Callable[[str], str] = lambda written: written) -> None:
    """Note the launch lines of `text`. In docs (`docs`), a named variable on a command line is a
    placeholder the reader fills in with a value (`./dist_launch.sh train.py $CONFIG $GPUS`); only `$@`
    and `$*` pass options on, as they do in scripts, where any variable may. `wrapper`: the name of the
    shell script `text` is, whose lines that pass its arguments on give what the lines that run it give.
    `beside`: a script as a line writes it -> the project path of the one in the launch file's folder, when
    that folder has it (`train.py` in `apex/train.sh` runs `apex/train.py`, not the other folders' train.py)."""
    variables: Dict[str, str] = {}  # a script's own `name="value"` lines, expanded where read after them
    for line in _CONTINUED.sub(" ", text).splitlines():
        assigned = _ASSIGNED.match(line)
        if assigned:  # (a definition, launched where it is expanded: `OPTS="--fp16 ..."`, then `python train.py $OPTS`)
            variables[assigned.group(1)] = assigned.group(2).strip("\"'")
            continue
        for _ in range(3):  # (a variable whose value names others: `run_cmd="python train.py ${gpt_options}"`)
            expanded = _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), line)
            if expanded == line:
                break
            line = expanded
        if keys:
            found.launch_true.update(keys_set_true(line))
        if "--" not in line and ".py" not in line and "-m" not in line:
            continue
        options = {m.group(1).replace("-", "_") for m in _OPTION.finditer(line)}
        if "accelerate" in line:  # (the precision `accelerate launch` gives the Accelerators of the script it runs)
            options |= {f"{ACCELERATE_PRECISION}{m.group(1).lower()}" for m in _ACCELERATE_PRECISION.finditer(line)}
        scripts = [m.group(1) + ".py" for m in _SCRIPT.finditer(line)]
        scripts += [m.group(1).replace(".", "/") + ".py" for m in _MODULE.finditer(line)]
        if not scripts and _OTHER_PROGRAM.match(line):
            continue  # (`wget --progress=bar "$URL"`, `pip install --upgrade ...`: another program's options, no run's)
        for called in _SHELL_SCRIPT.findall(line):
            found.wrapper_calls.setdefault(posixpath.basename(called), []).append(options | ({ANY_OPTION} if _passes_variables_on(line, docs) else set()))
        if _passes_variables_on(line, docs):
            options = options | {ANY_OPTION}
            if wrapper is not None:
                found.forwarded.setdefault(wrapper, []).append(options)
        # (a wrapper that names no script, `torchrun $SCRIPT "$@"`, may run any script with any option)
        found.mentioned |= options if not scripts else options - {ANY_OPTION}
        if not scripts:
            found.free |= options
        named = _CONFIG_NAMED.findall(line)
        command = _RUNNER.search(line) is not None  # (not prose that names the script: "- [x] Update train.py")
        for written in map(beside, scripts):
            found.by_script.setdefault(posixpath.basename(written), []).append((written, options))
            found.values_by_script.setdefault(posixpath.basename(written), []).append((written, _option_values(line)))
            if command:
                found.configs_named.setdefault(posixpath.basename(written), []).append((written, named))


def _option_values(line: str) -> Dict[str, Optional[str]]:
    """Option -> the value a launch line gives it: `--accum 1` and `--accum=1` give "1", a flag `--fp16`
    gives "", and `--lr $LR` gives None (a variable: any value)."""
    found: Dict[str, Optional[str]] = {}
    # (a usage line marks optional parts with brackets: `train.py --cfg X [--resume DIR --half]`)
    tokens = [token.lstrip("[").rstrip("]") for token in line.split()]
    for index, token in enumerate(tokens):
        match = _OPTION.match(token) if token.startswith("--") else None
        if match is None:
            continue
        name, _, value = token[2:].partition("=")
        if not _:
            following = tokens[index + 1] if index + 1 < len(tokens) else ""
            value = "" if not following or following.startswith("-") or following in ("\\", "|", "&&", ";", ">") else following
        found.setdefault(name.replace("-", "_"), None if "$" in value or "`" in value else value)
    return found


def _passes_variables_on(line: str, docs: bool = False) -> bool:
    """A variable stands where options go (`$@`, `$EXTRA_ARGS`; in docs, `$@` and `$*` only), not as
    the value of an option (`--model_type $model_type`, `--lr=$LR`)."""
    tokens = line.split()
    if _PRINTS.match(line):
        return False  # (`echo "Downloaded: $(numfmt --to=iec $SIZE)"` tells the reader something; it runs nothing)
    values = False  # the tokens so far are the values of an option: `--data_dirs $DATA_DIRS $dir` (nargs="+")
    for index, token in enumerate(tokens):
        bare = token.lstrip("\"'")
        variable = _PASSED_ON.match(bare) is not None
        value = variable and index > 0 and (tokens[index - 1].startswith("-") and "=" not in tokens[index - 1] or values and not _BUNDLE.search(bare))
        values = value
        if docs and not bare.startswith(("$@", "$*", "${@", "${*")):
            continue
        if re.match(r"[^\s]*\.py\b", bare):
            continue  # (the script a variable names, `python ${alg}.py`: what follows it are its options)
        if variable and not value:
            return True
    return False


def _launch_files(root: str) -> Tuple[List[str], Optional[Set[str]]]:
    """The launch files under `root`, and the project paths of its Python files (None when the walk
    stopped at MAX_LAUNCH_FILES before it saw them all)."""
    found: List[str] = []
    modules: Set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                modules.add(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
            elif name.endswith(LAUNCH_SUFFIXES) or name in LAUNCH_NAMES:
                found.append(os.path.join(folder, name))
                if len(found) == MAX_LAUNCH_FILES:
                    return found, None
    return found, modules
