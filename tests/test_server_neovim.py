"""The README's Neovim configuration, as written, in a headless Neovim: it starts `steplint server`,
shows SL101 on a buggy training file (also under a folder whose URI Neovim escapes), applies the
preferred quick fix, and the diagnostic goes. Then what Neovim itself sends: incremental changes,
`workspace/didChangeConfiguration` replacing the settings, and a request whose params do not fit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from conftest import ROOT
from test_server import TRAINING


# The start of every driver, run once Neovim has started on the file (init.lua holds only the
# README's block): `out` is written to $STEPLINT_RESULT at the end; wait for the client and the
# first diagnostics.
PRELUDE = r"""
local out = {}
local function wait_for(test)
  return vim.wait(60000, test, 50)
end
local function row_of(text)  -- 0-based row of the buffer's line `text`
  for i, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
    if line == text then return i - 1 end
  end
end
out.uri = vim.uri_from_bufnr(0)
out.attached = wait_for(function() return #vim.lsp.get_clients({ bufnr = 0, name = 'steplint' }) > 0 end)
local client = vim.lsp.get_clients({ bufnr = 0, name = 'steplint' })[1]
out.reported = wait_for(function() return #vim.diagnostic.get(0) > 0 end)
"""
FINISH = r"""
vim.fn.writefile({ vim.json.encode(out) }, vim.env.STEPLINT_RESULT)
vim.cmd('qall!')
"""

# Apply the preferred quick fix on the diagnostic's line, save, wait for the diagnostics of the
# saved text.
DRIVER = r"""
out.before = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(out.before, { code = d.code, source = d.source, lnum = d.lnum })
end
if out.reported then
  local first = vim.diagnostic.get(0)[1]
  vim.api.nvim_win_set_cursor(0, { first.lnum + 1, first.col })
  vim.lsp.buf.code_action({ apply = true, filter = function(action) return action.isPreferred end })
  out.fixed = wait_for(function()
    return vim.tbl_contains(vim.api.nvim_buf_get_lines(0, 0, -1, false), '    if committed:')
  end)
  vim.cmd('write')
  out.cleared = wait_for(function() return #vim.diagnostic.get(0) == 0 end)
end
"""


def readme_neovim_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## In your editor") :]
    return re.search(r"```lua\n(.*?)```", section, re.S).group(1)


def neovim_with_lsp_config() -> str:
    """A Neovim that has `vim.lsp.config` (0.11+): the test extra installs one on Linux x86-64."""
    nvim = shutil.which("nvim", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if nvim is None:
        pytest.skip("no nvim on PATH (the test extra installs Neovim 0.11 on Linux x86-64)")
    version = subprocess.run([nvim, "--version"], capture_output=True, text=True).stdout
    found = re.match(r"NVIM v(\d+)\.(\d+)", version)
    if not found or (int(found.group(1)), int(found.group(2))) < (0, 11):
        pytest.skip(f"{version.splitlines()[0] if version else nvim} has no vim.lsp.config (needs 0.11)")
    return nvim


def run_neovim(tmp_path: Path, driver: str, folder: str = "") -> Tuple[dict, Path]:
    """Neovim, headless, with the README's block as init.lua, on `folder`/train.py (TRAINING) in a
    project; `driver` runs after PRELUDE. What the driver put in `out`, and the file."""
    nvim = neovim_with_lsp_config()
    project = tmp_path / folder
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    train = project / "train.py"
    train.write_text(TRAINING)
    init = tmp_path / "init.lua"
    init.write_text(readme_neovim_block())
    script = tmp_path / "driver.lua"
    script.write_text(PRELUDE + driver + FINISH)
    result = tmp_path / "result.json"
    env = dict(os.environ, STEPLINT_RESULT=str(result), XDG_STATE_HOME=str(tmp_path / "state"),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    done = subprocess.run([nvim, "--headless", "--clean", "-u", str(init), str(train), "-c", f"luafile {script}"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.exists(), done.stderr
    seen = json.loads(result.read_text())
    assert seen["attached"] and seen["reported"], seen
    return seen, train


@pytest.mark.parametrize("folder", ["", "my runs/été"])
def test_readme_neovim_configuration_fixes_sl101(tmp_path: Path, folder: str):
    """Neovim escapes a space as %20 and é as %c3%a9 (lower case) in the document's URI."""
    seen, train = run_neovim(tmp_path, DRIVER, folder)
    if folder:
        assert seen["uri"].endswith("/my%20runs/%c3%a9t%c3%a9/train.py"), seen["uri"]
    assert seen["before"] == [{"code": "SL101", "source": "steplint", "lnum": 13}]
    assert seen["fixed"] and seen["cleared"]
    assert "if committed:\n        scheduler.step()" in train.read_text()


# Edits as Neovim sends them when the server asks for incremental sync: each is a range in the
# negotiated encoding. An astral character typed before the scheduler on its line (the diagnostic
# must follow to the byte), a gate typed in (the diagnostic goes, with nothing saved), the gate
# deleted (it comes back), and the noqa action computed on the server's text.
INCREMENTAL = r"""
out.sync = client.server_capabilities.textDocumentSync.change
out.encoding = client.offset_encoding
local function diagnostic_at(row, col)
  return wait_for(function()
    local found = vim.diagnostic.get(0)
    return #found == 1 and found[1].lnum == row and found[1].col == col
  end)
end
-- A page break (a line of its own to LSP and Neovim, two lines to str.splitlines) before the edits.
vim.api.nvim_buf_set_lines(0, 1, 1, true, { '\12', "label = 'ⓛⓡ 😀'" })
local row = row_of('    scheduler.step()')
vim.api.nvim_buf_set_text(0, row, 4, row, 4, { "note = '😀'; " })
out.followed = diagnostic_at(row, #"    note = '😀'; ")
local step_row = row_of('    scaler.step(optimizer)')
vim.api.nvim_buf_set_text(0, step_row, 4, step_row, 4, { 'committed = ' })
vim.api.nvim_buf_set_lines(0, row, row + 1, true, { "    note = '😀'", '    if committed:', '        scheduler.step()' })
out.gated = wait_for(function() return #vim.diagnostic.get(0) == 0 end)
vim.api.nvim_buf_set_lines(0, row + 1, row + 3, true, { '    scheduler.step()' })
out.ungated = diagnostic_at(row + 1, 4)
vim.api.nvim_win_set_cursor(0, { row + 2, 4 })
vim.lsp.buf.code_action({ apply = true, filter = function(action) return action.title:find('Disable', 1, true) ~= nil end })
out.suppressed = wait_for(function() return #vim.diagnostic.get(0) == 0 end)
out.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
"""


def test_neovim_incremental_changes_keep_the_servers_text_the_buffers(tmp_path: Path):
    seen, _ = run_neovim(tmp_path, INCREMENTAL)
    assert seen["sync"] == 2, seen  # TextDocumentSyncKind.Incremental: Neovim sends ranges
    assert seen["followed"] and seen["gated"] and seen["ungated"] and seen["suppressed"], seen
    expected = TRAINING.replace("import torch\n", "import torch\n\x0c\nlabel = 'ⓛⓡ 😀'\n", 1)
    expected = expected.replace("scaler.step(optimizer)", "committed = scaler.step(optimizer)")
    expected = expected.replace("    scheduler.step()\n", "    note = '😀'\n    scheduler.step()  # noqa: SL101\n")
    assert "\n".join(seen["lines"]) + "\n" == expected


# Settings as a Neovim user changes them (`client.settings`, then the notification): the second
# change leaves `ignore` out, and SL101 is back.
CONFIGURATION = r"""
client.settings = { steplint = { ignore = { 'SL101' } } }
client:notify('workspace/didChangeConfiguration', { settings = client.settings })
out.ignored = wait_for(function() return #vim.diagnostic.get(0) == 0 end)
client.settings = { steplint = { severity = 'error' } }
client:notify('workspace/didChangeConfiguration', { settings = client.settings })
out.back = wait_for(function()
  local found = vim.diagnostic.get(0)
  return #found == 1 and found[1].code == 'SL101' and found[1].severity == vim.diagnostic.severity.ERROR
end)
"""


def test_neovim_configuration_change_replaces_the_settings(tmp_path: Path):
    seen, _ = run_neovim(tmp_path, CONFIGURATION)
    assert seen["ignored"] and seen["back"], seen


# A request whose params do not deserialize (a number for the document): JSON-RPC's answer is an
# error, -32602; the server goes on serving the buffer.
INVALID_PARAMS = r"""
local response = client:request_sync('textDocument/codeAction', { textDocument = 7 }, 60000, 0)
out.error_code = response and response.err and response.err.code
local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
params.context = { diagnostics = vim.lsp.diagnostic.from(vim.diagnostic.get(0)) }
local actions = client:request_sync('textDocument/codeAction', params, 60000, 0)
out.actions = actions and actions.result and #actions.result or 0
"""


def test_neovim_request_with_unreadable_params_gets_invalid_params(tmp_path: Path):
    seen, _ = run_neovim(tmp_path, INVALID_PARAMS)
    assert seen["error_code"] == -32602, seen
    assert seen["actions"] >= 1, seen  # still serving


def test_readme_neovim_fix_all_call_applies_the_safe_fixes(tmp_path: Path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    call = re.search(r"fix-all is\s+`(vim\.lsp\.buf\.code_action\(.*?\))`", readme, re.S).group(1)
    driver = call + "\nout.fixed = wait_for(function() return vim.tbl_contains(vim.api.nvim_buf_get_lines(0, 0, -1, false), '    if committed:') end)\n"
    seen, _ = run_neovim(tmp_path, driver)
    assert seen["fixed"], seen
