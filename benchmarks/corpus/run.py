"""Lint the precision corpus and compare the diagnostics with the verdict ledger.

    python benchmarks/corpus/run.py [--repos a/b,c/d] [--jobs 2] [--emit-unjudged stubs.toml]

The corpus is public training code nobody here wrote, listed in `repos.toml` by repository and
pinned commit. Fetching is done beforehand (one bare git dir per repository under the mirror root,
`<mirror>/<owner>+<name>/...`); this script only reads: it extracts each pinned tree into a cache
folder outside the project, runs `steplint check` on it, fingerprints every diagnostic and looks it
up in `verdicts.toml`, where each diagnostic was judged true, false or unsure by reading the code.

Results are kept per repo under `<trees>/results/`, keyed by the commit and a hash of steplint's
own source, so a re-run after judging costs nothing until the analyzer changes.

It prints the verdict counts and precision (true / (true + false)) per rule and overall, the
diagnostics not judged yet (`--emit-unjudged FILE` appends TOML stubs for them), and the judged
diagnostics that disappeared (a fix in the model, or a regression in recall: read them).

A fingerprint names the flagged statement, not its line number, so it survives edits elsewhere in
the file: sha1 of `repo|path|code|flagged lines with whitespace collapsed|occurrence index` (the index
tells apart identical statements flagged by one rule in one file), first 16 hex digits.
"""

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent.parent
sys.path.insert(0, str(PROJECT))
from steplint.project.launches import LAUNCH_NAMES, LAUNCH_SUFFIXES  # noqa: E402
VERDICTS = ("true", "false", "unsure")
CONFIG_FILES = {"pyproject.toml", "steplint.toml", ".gitignore"}
# (trees extracted before lack what the format names: extracted again)
EXTRACTED_FORMAT = "with the repository's launch files, under a .git marker"


def launch_file(path):
    """A file steplint reads for how the project runs its scripts (steplint.project.launches)."""
    # (not notebooks: steplint lints those, and the corpus is the repositories' Python files)
    return (path.endswith(LAUNCH_SUFFIXES) and not path.endswith(".ipynb")) or Path(path).name in LAUNCH_NAMES


@dataclass
class Repo:
    name: str
    commit: str
    why: str
    paths: list[str] = field(default_factory=list)

    @property
    def slug(self):
        return self.name.replace("/", "+")


@dataclass
class Diagnostic:
    repo: str
    path: str
    code: str
    line: int
    message: str
    fingerprint: str = ""


@dataclass
class RepoResult:
    repo: Repo
    diagnostics: list[Diagnostic]
    timed_out_files: list[str]
    error: str = ""


def load_repos(path):
    with open(path, "rb") as handle:
        return [Repo(**entry) for entry in tomllib.load(handle)["repo"]]


def load_verdicts(path):
    if not path.exists():
        return []
    with open(path, "rb") as handle:
        return tomllib.load(handle).get("verdict", [])


def find_git_dir(mirror_root, repo):
    """The bare git dir the fetch tool made for `repo` (`<root>/<owner>+<name>/` or a folder below)."""
    base = mirror_root / repo.slug
    for candidate in (base, *sorted(base.glob("*")), *sorted(base.glob("*/*"))):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    raise FileNotFoundError(f"{repo.name}: no git dir under {base} (fetch it first)")


def extract(mirror_root, trees_root, repo):
    """The pinned commit's Python files (under `repo.paths`), extracted once into the cache folder.

    Only what steplint reads is written: `*.py` files, the repo's own config files and its launch
    files (scripts, READMEs, configs: what steplint reads for the options runs are given). Snapshots
    may lack their largest blobs (data files), which `git archive` would refuse.
    """
    tree = trees_root / f"{repo.slug}@{repo.commit[:12]}"
    done_marker = tree / ".corpus-extracted"
    if done_marker.exists() and EXTRACTED_FORMAT in done_marker.read_text():
        return tree
    git = ["git", f"--git-dir={find_git_dir(mirror_root, repo)}"]
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", repo.commit],
                             capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    blobs = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        within = not repo.paths or any(path == p or path.startswith(p.rstrip("/") + "/") for p in repo.paths)
        # (launch files from the whole repository: its README launches the code under `paths`)
        if kind == "blob" and mode != "120000" and ((path.endswith(".py") or Path(path).name in CONFIG_FILES) and within or launch_file(path)):
            blobs.append((sha, path))
    batch = subprocess.run([*git, "cat-file", "--batch"], input="".join(f"{sha}\n" for sha, _ in blobs).encode(),
                           capture_output=True, check=True).stdout
    offset = 0
    for sha, path in blobs:
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].split()
        offset = header_end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[offset:offset + size])
        offset += size + 1
    # The tree is a repository's root, as in a clone (an empty `.git`: steplint's project root is the
    # git root). Without it, a repository with an `__init__.py` at its top would take the cache folder of
    # every tree for its project, and the launch files of all of them for its own.
    (tree / ".git").mkdir(exist_ok=True)
    done_marker.write_text(f"{repo.commit}\n{EXTRACTED_FORMAT}\n")
    return tree


def run_steplint(tree, targets, timeout):
    """steplint's JSON report for `targets` (paths relative to `tree`), or None on timeout."""
    command = [sys.executable, "-m", "steplint", "check", "--output-format", "json", "--exit-zero", "-q", *targets]
    # its own process group, so that a timeout also ends the worker processes steplint starts
    with subprocess.Popen(command, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None
    if process.returncode != 0:
        raise RuntimeError(f"steplint exited {process.returncode} on {tree}: {stderr.strip()[-2000:]}")
    return json.loads(stdout or "[]")


def python_files(tree):
    return sorted(str(path.relative_to(tree)) for path in tree.rglob("*.py") if path.is_file())


def lint_repo(repo, tree, repo_timeout, file_timeout):
    """Diagnostics for one repo: one run over the tree; on timeout, one run per file."""
    timed_out = []
    report = run_steplint(tree, ["."], repo_timeout)
    if report is None:
        report = []
        for path in python_files(tree):
            file_report = run_steplint(tree, [path], file_timeout)
            if file_report is None:
                timed_out.append(path)
            else:
                report.extend(file_report)
    return [diagnostic_from_json(repo, tree, item) for item in report], timed_out


def diagnostic_from_json(repo, tree, item):
    path = Path(item["filename"])
    path = path.relative_to(tree) if path.is_absolute() else path
    return Diagnostic(repo=repo.name, path=path.as_posix().removeprefix("./"), code=item["code"],
                      line=item["location"]["row"], message=item["message"]), item["end_location"]["row"]


def fingerprint_all(tree, diagnostics_with_ends):
    """Give each diagnostic its fingerprint; the occurrence index follows source order."""
    lines_of = {}
    occurrences = Counter()
    result = []
    for diagnostic, end_row in sorted(diagnostics_with_ends, key=lambda pair: (pair[0].path, pair[0].line, pair[0].code)):
        if diagnostic.path not in lines_of:
            lines_of[diagnostic.path] = (tree / diagnostic.path).read_text(encoding="utf-8", errors="replace").splitlines()
        lines = lines_of[diagnostic.path][diagnostic.line - 1:max(end_row, diagnostic.line)]
        text = " ".join(" ".join(lines).split())
        identity = (diagnostic.repo, diagnostic.path, diagnostic.code, text)
        index = occurrences[identity]
        occurrences[identity] += 1
        key = "|".join((*identity, str(index)))
        diagnostic.fingerprint = hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]
        result.append(diagnostic)
    return result


def steplint_signature():
    """A hash of the analyzer's own source: results linted by the same code are reused."""
    digest = hashlib.sha1()
    for path in sorted(path for folder in ("steplint", "rules") for path in (PROJECT / folder).rglob("*.py")):
        digest.update(path.relative_to(PROJECT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def process(repo, args):
    saved = args.trees / "results" / f"{repo.slug}@{repo.commit[:12]}-{args.signature}.json"
    if saved.exists() and not args.fresh:
        data = json.loads(saved.read_text())
        return RepoResult(repo, [Diagnostic(**item) for item in data["diagnostics"]], data["timed_out"])
    try:
        tree = extract(args.mirror, args.trees, repo)
        found, timed_out = lint_repo(repo, tree, args.timeout, args.file_timeout)
        result = RepoResult(repo, fingerprint_all(tree, found), timed_out)
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps({"diagnostics": [d.__dict__ for d in result.diagnostics], "timed_out": timed_out}))
        return result
    except Exception as error:  # one broken repo must not hide the others' figures
        return RepoResult(repo, [], [], error=f"{type(error).__name__}: {error}")


def toml_string(text):
    return json.dumps(text, ensure_ascii=False)


def stub(diagnostic):
    return (f"[[verdict]]\nrepo = {toml_string(diagnostic.repo)}\npath = {toml_string(diagnostic.path)}\n"
            f"code = {toml_string(diagnostic.code)}\nfingerprint = {toml_string(diagnostic.fingerprint)}\n"
            f"line = {diagnostic.line}\nverdict = \"\"\nreason = \"\"  # {diagnostic.message}\n\n")


def precision(counts):
    judged = counts["true"] + counts["false"]
    return f"{counts['true'] / judged:.3f}" if judged else "n/a"


def report(results, verdicts, args):
    by_fingerprint = {entry["fingerprint"]: entry for entry in verdicts}
    linted = {result.repo.name for result in results if not result.error}
    per_rule = defaultdict(Counter)
    unjudged, seen = [], set()
    diagnostics = [d for result in results for d in result.diagnostics]
    for diagnostic in diagnostics:
        entry = by_fingerprint.get(diagnostic.fingerprint)
        if entry is None or entry.get("verdict") not in VERDICTS:
            unjudged.append(diagnostic)
            continue
        seen.add(diagnostic.fingerprint)
        per_rule[diagnostic.code][entry["verdict"]] += 1
    present = {diagnostic.fingerprint for diagnostic in diagnostics}
    disappeared = [entry for entry in verdicts if entry["repo"] in linted and entry["fingerprint"] not in present]

    print(f"repos: {len(linted)} linted, {len(results) - len(linted)} failed; diagnostics: {len(diagnostics)}")
    for result in results:
        if result.error:
            print(f"  FAILED {result.repo.name}: {result.error}")
        for path in result.timed_out_files:
            print(f"  TIMEOUT {result.repo.name} {path}")
    total = Counter()
    print(f"\n{'rule':8} {'true':>5} {'false':>5} {'unsure':>6} {'precision':>9}")
    for code in sorted(per_rule):
        counts = per_rule[code]
        total.update(counts)
        print(f"{code:8} {counts['true']:5} {counts['false']:5} {counts['unsure']:6} {precision(counts):>9}")
    print(f"{'all':8} {total['true']:5} {total['false']:5} {total['unsure']:6} {precision(total):>9}")

    if unjudged:
        print(f"\nnot judged yet: {len(unjudged)}")
        for diagnostic in unjudged:
            print(f"  {diagnostic.repo} {diagnostic.path}:{diagnostic.line} {diagnostic.code} {diagnostic.fingerprint}  {diagnostic.message}")
    if disappeared:
        print(f"\njudged but gone: {len(disappeared)}")
        for entry in disappeared:
            print(f"  {entry['repo']} {entry['path']}:{entry.get('line', '?')} {entry['code']} {entry['fingerprint']} "
                  f"(was {entry['verdict']}: {entry.get('reason', '')})")
    if args.emit_unjudged and unjudged:
        with open(args.emit_unjudged, "a", encoding="utf-8") as handle:
            handle.writelines(stub(diagnostic) for diagnostic in unjudged)
        print(f"\n{len(unjudged)} stubs appended to {args.emit_unjudged}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("CORPUS_MIRROR", "/work/.mirror")),
                        help="root of the fetched bare git dirs (default /work/.mirror)")
    parser.add_argument("--trees", type=Path, default=Path(os.environ.get("CORPUS_TREES", "/work/corpus-trees")),
                        help="cache folder for extracted trees, outside the project (default /work/corpus-trees)")
    parser.add_argument("--repos-file", type=Path, default=HERE / "repos.toml")
    parser.add_argument("--verdicts", type=Path, default=HERE / "verdicts.toml")
    parser.add_argument("--repos", default="", help="comma-separated owner/name filter")
    parser.add_argument("--jobs", type=int, default=1, help="repos linted at once")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for one repo before per-file runs")
    parser.add_argument("--file-timeout", type=float, default=60, help="seconds for one file in per-file runs")
    parser.add_argument("--emit-unjudged", metavar="FILE", help="append TOML stubs for unjudged diagnostics")
    parser.add_argument("--dump", metavar="FILE", help="write all diagnostics with fingerprints as JSON")
    parser.add_argument("--fresh", action="store_true", help="re-lint even when results of the same steplint code exist")
    args = parser.parse_args(argv)
    args.signature = steplint_signature()
    args.mirror, args.trees = args.mirror.resolve(), args.trees.resolve()  # (diagnostics' paths are made relative to the tree)

    repos = load_repos(args.repos_file)
    wanted = {name.strip() for name in args.repos.split(",") if name.strip()}
    unknown = wanted - {repo.name for repo in repos}
    if unknown:
        parser.error(f"not in {args.repos_file.name}: {', '.join(sorted(unknown))}")
    repos = [repo for repo in repos if not wanted or repo.name in wanted]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda repo: process(repo, args), repos))
    if args.dump:
        Path(args.dump).write_text(json.dumps([d.__dict__ for r in results for d in r.diagnostics], indent=1))
    report(results, load_verdicts(args.verdicts), args)


if __name__ == "__main__":
    main()
