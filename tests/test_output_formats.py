"""The CI output formats, each read by (a stand-in faithful to) its consumer: JUnit XML by an XML
parser against the JUnit XSD's required attributes, GitLab Code Quality's required fields,
reviewdog's rdjson schema with jsonschema, and the line formats as ruff writes them."""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from conftest import FIXTURES

BUGGY = (FIXTURES / "SL101" / "plain_amp_script.py").read_text()
# A message with XML's and Azure's special characters, and a non-ASCII line before the finding.
NON_ASCII = "# Übung: <lr> & \"warmup\"; ü\n" + BUGGY


def steplint(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "steplint", "check", "--no-cache", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(NON_ASCII, encoding="utf-8")
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def _concise(tree):
    return steplint("--output-format", "concise", "-q", ".", cwd=tree).stdout.splitlines()


def test_concise_marks_safe_fixes_as_ruff_does(tree):
    lines = _concise(tree)
    assert lines and all(" SL" in line for line in lines)
    assert any(" [*] " in line for line in lines)
    fixable = json.loads(steplint("--output-format", "json", ".", cwd=tree).stdout)
    assert [" [*] " in line for line in lines] == [d["fix"] is not None and d["fix"]["applicability"] == "safe" for d in fixable]


def test_unsafe_fixes_are_marked_only_under_unsafe_fixes(tmp_path):
    target = FIXTURES / "SL301" / "batch_index_names.py"  # its fix is unsafe
    found = json.loads(steplint("--output-format", "json", str(target), cwd=tmp_path).stdout)
    assert found and all(d["fix"] and d["fix"]["applicability"] == "unsafe" for d in found)
    for output_format in ("concise", "grouped"):
        plain = steplint("--output-format", output_format, "-q", "--color", "never", str(target), cwd=tmp_path).stdout
        marked = steplint("--output-format", output_format, "-q", "--color", "never", "--unsafe-fixes", str(target), cwd=tmp_path).stdout
        assert "[*]" not in plain and marked.count("[*]") == len(found)


def test_json_filename_is_absolute(tree):
    [*items] = json.loads(steplint("--output-format", "json", "src/train.py", cwd=tree).stdout)
    assert items and {d["filename"] for d in items} == {str((tree / "src" / "train.py").resolve())}
    piped = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "json", "-"], input=BUGGY, capture_output=True,
                           text=True, cwd=tree)
    assert {d["filename"] for d in json.loads(piped.stdout)} == {"-"}


def test_grouped_lists_each_file_once_with_aligned_positions(tree):
    (tree / "other.py").write_text(BUGGY)
    done = steplint("--output-format", "grouped", "--color", "never", ".", cwd=tree)
    blocks = done.stdout.split("\n\n")
    headers = [b.splitlines()[0] for b in blocks if b.strip() and not b.startswith(("Found", "["))]
    assert headers == ["other.py:", "src/train.py:"]
    rows = [line for b in blocks for line in b.splitlines()[1:] if line.startswith("  ")]
    assert len(rows) == len(_concise(tree))
    assert "Found" in done.stdout  # a format for people: with the summary


def test_pylint_lines(tree):
    concise = _concise(tree)
    done = steplint("--output-format", "pylint", "src/train.py", cwd=tree)
    expected = [f"{path}:{row}: [{rest.split()[0]}]" for path, row, _, rest in (line.split(":", 3) for line in concise)]
    assert [line.split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in done.stdout.splitlines()] == expected
    assert "Found" not in done.stdout


def test_azure_logging_commands_escape_the_message(tree):
    (tree / "src" / "x;y].py").write_text(BUGGY)
    done = steplint("--output-format", "azure", "src", cwd=tree)
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("##vso[task.logissue type=error;") for line in lines)
    for line in lines:
        properties, _, message = line[len("##vso[task.logissue "):].partition("]")
        fields = dict(p.split("=", 1) for p in properties.rstrip(";").split(";"))
        assert set(fields) == {"type", "sourcepath", "linenumber", "columnnumber", "code"}
        assert os.path.isabs(fields["sourcepath"].replace("%3B", ";").replace("%5D", "]"))
        assert ";" not in message and "%3B" in message  # the messages hold a `;`


def test_junit_xml_parses_and_has_the_xsd_required_attributes(tree):
    done = steplint("--output-format", "junit", ".", cwd=tree)
    assert done.returncode == 1
    root = ET.fromstring(done.stdout.encode("utf-8"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    cases = [case for suite in suites for case in suite.findall("testcase")]
    assert len(cases) == len(_concise(tree)) == int(root.get("failures")) == int(root.get("tests"))
    for suite in suites:
        assert {"name", "tests", "failures", "errors", "time", "timestamp", "hostname"} <= set(suite.attrib)
        assert int(suite.get("tests")) == len(suite.findall("testcase"))
        assert os.path.isabs(suite.get("name"))
    for case in cases:
        assert {"name", "classname", "time"} <= set(case.attrib)
        [failure] = case.findall("failure")
        assert {"message", "type"} <= set(failure.attrib) and failure.get("type").startswith("SL")
        assert failure.text.startswith(f"line {case.get('line')}, col {case.get('column')}, ")


def test_junit_of_a_clean_run_is_one_passing_case(tree):
    done = steplint("--output-format", "junit", "clean.py", cwd=tree)
    assert done.returncode == 0
    root = ET.fromstring(done.stdout)
    [case] = root.iter("testcase")
    assert root.get("failures") == "0" and not case.findall("failure")


# GitLab's Code Quality report: the fields its documentation marks required.
CODE_QUALITY = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string"},
            "check_name": {"type": "string"},
            "fingerprint": {"type": "string"},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {"path": {"type": "string"},
                               "lines": {"type": "object", "required": ["begin"], "properties": {"begin": {"type": "integer", "minimum": 1}}}},
            },
        },
    },
}


def test_gitlab_code_quality_fields_and_stable_fingerprints(tree):
    (tree / "src" / "second.py").write_text(NON_ASCII)
    env = {**os.environ, "CI_PROJECT_DIR": str(tree)}
    first = json.loads(steplint("--output-format", "gitlab", ".", cwd=tree / "src", env=env).stdout)
    jsonschema.validate(first, CODE_QUALITY)
    assert {i["location"]["path"] for i in first} == {"src/train.py", "src/second.py"}  # relative to the project
    fingerprints = [i["fingerprint"] for i in first]
    assert len(set(fingerprints)) == len(fingerprints) >= 2
    # Lines added above the findings move them, but GitLab must still see the same issues.
    (tree / "src" / "train.py").write_text("import os\n\n" + NON_ASCII)
    moved = json.loads(steplint("--output-format", "gitlab", ".", cwd=tree / "src", env=env).stdout)
    assert sorted(i["fingerprint"] for i in moved) == sorted(fingerprints)
    assert [i["location"]["lines"]["begin"] for i in moved if i["location"]["path"] == "src/train.py"] == [
        i["location"]["lines"]["begin"] + 2 for i in first if i["location"]["path"] == "src/train.py"]


# reviewdog's rdjson schema (proto/rdf/jsonschema/DiagnosticResult.json, draft-04), its descriptions left out.
_SEVERITY = {"enum": ["UNKNOWN_SEVERITY", 0, "ERROR", 1, "WARNING", 2, "INFO", 3], "oneOf": [{"type": "string"}, {"type": "integer"}]}
_OBJECT = {"type": "object", "additionalProperties": True}
RDJSON = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "$ref": "#/definitions/DiagnosticResult",
    "definitions": {
        "DiagnosticResult": {**_OBJECT, "properties": {
            "diagnostics": {"type": "array", "items": {"$ref": "#/definitions/Diagnostic"}},
            "source": {"$ref": "#/definitions/Source"},
            "severity": _SEVERITY}},
        "Code": {**_OBJECT, "properties": {"value": {"type": "string"}, "url": {"type": "string"}}},
        "Diagnostic": {**_OBJECT, "properties": {
            "message": {"type": "string"},
            "location": {"$ref": "#/definitions/Location"},
            "severity": _SEVERITY,
            "source": {"$ref": "#/definitions/Source"},
            "code": {"$ref": "#/definitions/Code"},
            "suggestions": {"type": "array", "items": {"$ref": "#/definitions/Suggestion"}},
            "original_output": {"type": "string"}}},
        "Location": {**_OBJECT, "properties": {"path": {"type": "string"}, "range": {"$ref": "#/definitions/Range"}}},
        "Position": {**_OBJECT, "properties": {"line": {"type": "integer"}, "column": {"type": "integer"}}},
        "Range": {**_OBJECT, "properties": {"start": {"$ref": "#/definitions/Position"}, "end": {"$ref": "#/definitions/Position"}}},
        "Source": {**_OBJECT, "properties": {"name": {"type": "string"}, "url": {"type": "string"}}},
        "Suggestion": {**_OBJECT, "properties": {"range": {"$ref": "#/definitions/Range"}, "text": {"type": "string"}}},
    },
}


def _apply_suggestions(data: bytes, suggestions) -> bytes:
    """Apply rdjson suggestions as reviewdog reads them: 1-based lines, 1-based UTF-8 byte columns, end exclusive."""
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    offset = lambda p: starts[p["line"] - 1] + p["column"] - 1  # noqa: E731
    for s in sorted(suggestions, key=lambda s: offset(s["range"]["start"]), reverse=True):
        data = data[: offset(s["range"]["start"])] + s["text"].encode() + data[offset(s["range"]["end"]):]
    return data


def test_rdjson_validates_and_its_suggestions_are_the_fix(tree):
    done = steplint("--output-format", "rdjson", "src/train.py", cwd=tree)
    report = json.loads(done.stdout)
    jsonschema.validate(report, RDJSON)
    assert report["diagnostics"] and all(d["location"]["path"] == str((tree / "src" / "train.py").resolve()) for d in report["diagnostics"])
    suggestions = [s for d in report["diagnostics"] for s in d.get("suggestions", [])]
    assert suggestions
    fixed_copy = tree / "fixed.py"
    shutil.copy(tree / "src" / "train.py", fixed_copy)
    steplint("--fix", "fixed.py", cwd=tree)
    assert _apply_suggestions((tree / "src" / "train.py").read_bytes(), suggestions) == fixed_copy.read_bytes()
