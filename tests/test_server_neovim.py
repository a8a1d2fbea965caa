"""The README's Neovim configuration, as written, in a headless Neovim: it starts `steplint server`,
shows SL101 on a buggy training file, applies the preferred quick fix, and the diagnostic goes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from test_server import TRAINING


# Run once Neovim has started on the file (init.lua holds only the README's block): wait for the
# diagnostics, apply the preferred quick fix on the diagnostic's line, save, wait for the
# diagnostics of the saved text, write down what was seen.
DRIVER = r"""
local out = {}
local function wait_for(test)
  return vim.wait(60000, test, 50)
end
out.attached = wait_for(function() return #vim.lsp.get_clients({ bufnr = 0, name = 'steplint' }) > 0 end)
out.reported = wait_for(function() return #vim.diagnostic.get(0) > 0 end)
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
vim.fn.writefile({ vim.json.encode(out) }, vim.env.STEPLINT_RESULT)
vim.cmd('qall!')
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


def test_readme_neovim_configuration_fixes_sl101(tmp_path: Path):
    nvim = neovim_with_lsp_config()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    train = tmp_path / "train.py"
    train.write_text(TRAINING)
    init = tmp_path / "init.lua"
    init.write_text(readme_neovim_block())
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    result = tmp_path / "result.json"
    env = dict(os.environ, STEPLINT_RESULT=str(result), XDG_STATE_HOME=str(tmp_path / "state"),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    done = subprocess.run([nvim, "--headless", "--clean", "-u", str(init), str(train), "-c", f"luafile {driver}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert result.exists(), done.stderr
    seen = json.loads(result.read_text())
    assert seen["attached"] and seen["reported"]
    assert seen["before"] == [{"code": "SL101", "source": "steplint", "lnum": 13}]
    assert seen["fixed"] and seen["cleared"]
    assert "if committed:\n        scheduler.step()" in train.read_text()
