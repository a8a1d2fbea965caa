"""Jupyter notebooks through the real command line: cell locations, fixes written back into the
cells that changed (nothing else in the JSON moves), IPython escapes kept, discovery and settings."""

import json
import subprocess
import sys

import nbformat
import pytest

from steplint import notebook
from steplint.config import Settings
from steplint.engine import fix_source

from conftest import FIXTURES

BUGGY_NOTEBOOK = FIXTURES / "SL101" / "notebook_amp.ipynb"
FIXED_NOTEBOOK = FIXTURES / "SL101" / "notebook_amp.fixed.ipynb"
LOOP = [
    "for batch in batches:\n",
    "    opt.zero_grad()\n",
    "    scaler.scale(net(batch).sum()).backward()\n",
    "    scaler.step(opt)\n",
    "    scaler.update()\n",
    "    warmup.step()",
]
SETUP = [
    "net = torch.nn.Linear(4, 1)\n",
    "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n",
    "warmup = torch.optim.lr_scheduler.LinearLR(opt)\n",
    "scaler = torch.amp.GradScaler('cuda')\n",
    "batches = [torch.randn(2, 4)]",
]


def steplint(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "steplint", *args], capture_output=True, text=True, cwd=cwd)


def code(source, **extra):
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source, **extra}


def write_notebook(path, *cells, indent=1):
    data = {"cells": list(cells), "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def fixed_cells(path):
    """The cells' sources after `check --fix --unsafe-fixes`, as strings."""
    done = steplint("check", "--fix", "--unsafe-fixes", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def test_locations_in_full_and_concise_output(tmp_path):
    target = tmp_path / "nb.ipynb"
    target.write_text(BUGGY_NOTEBOOK.read_text(encoding="utf-8"), encoding="utf-8")
    full = steplint("check", str(target))
    assert full.returncode == 1
    assert f"{target}:cell 5:9:5: SL101" in full.stdout
    assert "9 |     warmup.step()  # expect: SL101" in full.stdout  # the cell's own line and row
    concise = steplint("check", "--output-format", "concise", "--quiet", str(target))
    assert concise.stdout == f"{target}:cell 5:9:5: SL101 [*] `warmup` advances even when `scaler.step(opt)` skipped the update; gate it on the committed update\n"


def test_json_has_the_cell_and_rows_within_it(tmp_path):
    target = tmp_path / "nb.ipynb"
    target.write_text(BUGGY_NOTEBOOK.read_text(encoding="utf-8"), encoding="utf-8")
    [item] = json.loads(steplint("check", "--output-format", "json", str(target)).stdout)
    assert item["cell"] == 5 and item["location"] == {"row": 9, "column": 5} and item["end_location"] == {"row": 9, "column": 18}
    edits = sorted((e["location"]["row"], e["content"].strip()[:22]) for e in item["fix"]["edits"])
    assert edits == [(4, "def committed_step(sca"), (7, "committed = committed_s"[:22]), (9, "if committed:")]


def test_fix_round_trip_changes_only_the_edited_cells_sources(tmp_path):
    target = tmp_path / "nb.ipynb"
    original = BUGGY_NOTEBOOK.read_text(encoding="utf-8")
    target.write_text(original, encoding="utf-8")
    done = steplint("check", "--fix", str(target))
    assert done.returncode == 0 and "Fixed 1 error" in done.stdout
    after = target.read_text(encoding="utf-8")
    nbformat.validate(nbformat.reads(after, as_version=4))
    before_data, after_data = json.loads(original), json.loads(after)
    changed = [i + 1 for i, (a, b) in enumerate(zip(before_data["cells"], after_data["cells"])) if a != b]
    assert changed == [2, 5]
    for a, b in zip(before_data["cells"], after_data["cells"]):
        assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
    assert {k: v for k, v in before_data.items() if k != "cells"} == {k: v for k, v in after_data.items() if k != "cells"}
    # nbformat's own writer lays the result out byte for byte the same way (plus its final newline)
    assert nbformat.writes(nbformat.reads(after, as_version=4)) + "\n" == after
    cells = ["".join(c["source"]) for c in after_data["cells"]]
    assert cells[1].startswith("%matplotlib inline\nimport torch\n")  # escapes untouched, helper after the imports
    assert cells[2] == "!nvidia-smi --query-gpu=name --format=csv\ndevices = !ls /dev\ntorch.amp.GradScaler?"
    assert cells[4].startswith("%%time\n") and "    %time torch.cuda.synchronize()\n" in cells[4]
    assert cells[5] == "%%bash\necho scaler.step(opt) \\\n  && warmup.step()"  # not Python: never linted
    again = steplint("check", "--fix", str(target))
    assert again.returncode == 0 and target.read_text(encoding="utf-8") == after
    for cell in notebook.parse(after).cells:  # no runtime needed: every code cell compiles
        compile(cell.text, f"cell {cell.number}", "exec")


def test_diff_names_the_cells(tmp_path):
    target = tmp_path / "nb.ipynb"
    target.write_text(BUGGY_NOTEBOOK.read_text(encoding="utf-8"), encoding="utf-8")
    done = steplint("check", "--diff", str(target))
    assert done.returncode == 1
    assert f"--- a/{target}:cell 2\n" in done.stdout and f"+++ b/{target}:cell 5\n" in done.stdout
    assert "-    scaler.step(opt)\n+    committed = committed_step(scaler, opt)\n" in done.stdout
    assert target.read_text(encoding="utf-8") == BUGGY_NOTEBOOK.read_text(encoding="utf-8")


def test_helper_goes_into_the_first_code_cell_after_its_imports(tmp_path):
    target = write_notebook(tmp_path / "nb.ipynb", code(["import torch"]), code(["import math\n", *SETUP]), code(LOOP))
    cells = fixed_cells(target)
    assert cells[0].startswith("import torch\n\n\ndef committed_step(scaler, optimizer):\n")
    assert not cells[0].endswith("\n")  # no trailing blank lines left in the cell
    assert cells[1].startswith("import math\n")
    assert "    committed = committed_step(scaler, opt)\n" in cells[2] and cells[2].endswith("    if committed:\n        warmup.step()")


def test_helper_never_goes_inside_a_cell_magic_or_above_an_escape(tmp_path):
    target = write_notebook(
        tmp_path / "nb.ipynb",
        {"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
        code("!pip install torch"),
        code(["%%capture\n", "import torch\n", *SETUP]),
        code(LOOP),
    )
    cells = fixed_cells(target)
    assert cells[1] == "!pip install torch"
    assert cells[2].startswith("%%capture\nimport torch\n\n\ndef committed_step(scaler, optimizer):\n")


def test_string_sources_and_other_layouts_are_kept(tmp_path):
    target = write_notebook(tmp_path / "nb.ipynb", code("import torch\n" + "".join(SETUP)), code("".join(LOOP)), indent=2)
    original = target.read_text(encoding="utf-8")
    cells = fixed_cells(target)
    after = target.read_text(encoding="utf-8")
    data = json.loads(after)
    assert all(isinstance(c["source"], str) for c in data["cells"])  # a string stays a string
    assert after == json.dumps(data, indent=2, ensure_ascii=False) + "\n"  # same indentation as before
    assert len(after.splitlines()) == len(original.splitlines())
    assert cells[1].endswith("    if committed:\n        warmup.step()")


def test_magics_inside_blocks_and_brackets(tmp_path):
    loop = LOOP[:-1] + ["    %time warmup.step()\n", "    total = (1\n", "        % 2)\n", "    print?"]
    book = notebook.parse(json.dumps({"cells": [code(["import torch\n", *SETUP]), code(loop)], "metadata": {}, "nbformat": 4}))
    [_, cell] = book.cells
    assert "    0#ime warmup.step()\n" in cell.text  # a statement, so the block keeps a body
    assert "        % 2)\n" in cell.text  # an operator inside brackets is Python, not an escape
    compile(cell.text, "cell", "exec")
    assert notebook.mask("x = !ls\ny = %env HOME\n!pip install a \\\n   b\n") == "x = 0#s\ny = 0#nv HOME\n#pip install a \\\n   #\n"
    assert notebook.mask("%%writefile setup.py\nprint(1)\n") is None


def test_invalid_notebook_is_reported_and_the_run_goes_on(tmp_path):
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "old.ipynb").write_text('{"worksheets": []}', encoding="utf-8")
    write_notebook(tmp_path / "good.ipynb", code(["import torch\n", *SETUP]), code(LOOP))
    done = steplint("check", "--output-format", "concise", str(tmp_path))
    assert done.returncode == 1
    lines = sorted(done.stdout.splitlines())
    assert lines[0].startswith(f"{tmp_path / 'broken.ipynb'}:1:1: SL001 Invalid notebook JSON: ")
    assert f"{tmp_path / 'good.ipynb'}:cell 2:6:5: SL101" in lines[1]
    assert lines[2] == f"{tmp_path / 'old.ipynb'}:1:1: SL001 Not a Jupyter notebook (nbformat 4): no `cells` list"


def test_cell_syntax_error_is_located_in_its_cell(tmp_path):
    target = write_notebook(tmp_path / "nb.ipynb", code(["import torch\n", "scaler.step(opt)"]), code(["def f(:\n", "    pass"]))
    done = steplint("check", "--output-format", "json", str(target))
    [item] = json.loads(done.stdout)
    assert (item["code"], item["cell"], item["location"]) == ("SL001", 2, {"row": 1, "column": 7})  # Python's position, in the cell


def test_include_setting_turns_notebooks_off(tmp_path):
    write_notebook(tmp_path / "nb.ipynb", code(["import torch\n", *SETUP]), code(LOOP))
    assert steplint("check", "--output-format", "concise", ".", cwd=tmp_path).stdout.startswith("nb.ipynb:cell 2:6:5: SL101")
    (tmp_path / "pyproject.toml").write_text('[tool.steplint]\ninclude = ["*.py", "*.pyi"]\n')
    done = steplint("check", ".", cwd=tmp_path)
    assert done.returncode == 0 and "nb.ipynb" not in done.stdout
    forced = steplint("check", "--force-exclude", "nb.ipynb", cwd=tmp_path)  # as pre-commit passes it
    assert forced.returncode == 0 and "nb.ipynb" not in forced.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.steplint]\ninclude = ["*.py"]\nextend-include = ["*.ipynb"]\n')
    assert "nb.ipynb:cell 2:6:5: SL101" in steplint("check", ".", cwd=tmp_path).stdout


@pytest.mark.parametrize("key", ["include", "extend-include"])
def test_include_must_be_a_list_of_globs(tmp_path, key):
    (tmp_path / "pyproject.toml").write_text(f'[tool.steplint]\n{key} = "*.ipynb"\n')
    done = steplint("check", ".", cwd=tmp_path)
    assert done.returncode == 2
    assert "pyproject.toml [tool.steplint]: " + key + ": expected a list of strings" in done.stderr


def test_fixes_that_cannot_map_back_leave_the_notebook_alone():
    book = notebook.parse(BUGGY_NOTEBOOK.read_text(encoding="utf-8"))
    result = fix_source("nb.ipynb", book.source, Settings(), unsafe_fixes=True)
    assert notebook.rewrite(book, result.text) == FIXED_NOTEBOOK.read_text(encoding="utf-8")
    assert notebook.rewrite(book, result.text.replace("# %% steplint-cell 3\n", "")) is None  # a cell boundary lost
    assert notebook.rewrite(book, result.text.replace("#matplotlib inline\n", "")) is None  # an escape lost


def test_stdin_notebook_prints_the_fixed_notebook(tmp_path):
    original = BUGGY_NOTEBOOK.read_text(encoding="utf-8")
    fix = subprocess.run([sys.executable, "-m", "steplint", "check", "--fix", "--stdin-filename", "nb.ipynb", "-"],
                         input=original, capture_output=True, text=True)
    assert fix.returncode == 0 and fix.stdout == FIXED_NOTEBOOK.read_text(encoding="utf-8")
    lint = subprocess.run([sys.executable, "-m", "steplint", "check", "--output-format", "concise", "--stdin-filename", "nb.ipynb", "-"],
                          input=original, capture_output=True, text=True)
    assert lint.returncode == 1 and lint.stdout.startswith("nb.ipynb:cell 5:9:5: SL101")
    unchanged = subprocess.run([sys.executable, "-m", "steplint", "check", "--fix", "--stdin-filename", "nb.ipynb", "-"],
                               input=FIXED_NOTEBOOK.read_text(encoding="utf-8"), capture_output=True, text=True)
    assert unchanged.stdout == FIXED_NOTEBOOK.read_text(encoding="utf-8")


def test_add_noqa_writes_into_the_cell(tmp_path):
    target = tmp_path / "nb.ipynb"
    target.write_text(BUGGY_NOTEBOOK.read_text(encoding="utf-8"), encoding="utf-8")
    assert steplint("check", "--add-noqa", str(target)).returncode == 0
    cells = json.loads(target.read_text(encoding="utf-8"))["cells"]
    assert "    warmup.step()  # expect: SL101  # noqa: SL101\n" in cells[4]["source"]
    assert steplint("check", str(target)).returncode == 0
