"""The server shows a diagnostic's premises (`check --show-evidence`) as its relatedInformation, each
at the place it was established; driven by the real server over stdio, as tests/test_server.py."""

from lsprotocol import types

from test_server import SCHEDULER_ROW, TRAINING, Editor, client, editor  # noqa: F401 (pytest fixtures)

import pytest

pytestmark = pytest.mark.asyncio

STEP_ROW = 11  # 0-based line of `scaler.step(optimizer)` in TRAINING


async def test_premises_are_related_information(editor: Editor):
    uri = editor.open("train.py", TRAINING)
    (diagnostic,) = await editor.diagnostics(uri)
    assert diagnostic.code == "SL101" and diagnostic.range.start.line == SCHEDULER_ROW
    related = {(r.location.uri, r.location.range.start.line, r.location.range.start.character): r.message for r in diagnostic.related_information}
    assert related[(uri, STEP_ROW, 4)].startswith("`scaler.step(optimizer)` can skip the update: GradScaler.step skips")
    assert related[(uri, SCHEDULER_ROW, 4)] == "`scheduler` is a scheduler, built by `torch.optim.lr_scheduler.StepLR`"
