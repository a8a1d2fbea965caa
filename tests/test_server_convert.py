"""Offsets to LSP positions in each position encoding a client can choose."""

import pytest
from pygls.workspace import PositionCodec

from steplint.server.convert import position, whole_text_edit
from steplint.source import Source

TEXT = 'note = "😋é"; scheduler.step()\r\nnext_line = 1\n'


@pytest.mark.parametrize("encoding, character", [("utf-8", 17), ("utf-16", 14), ("utf-32", 13)])
def test_position_counts_in_the_client_encoding(encoding, character):
    units = PositionCodec(encoding).client_num_units
    offset = TEXT.index("scheduler")
    assert position(Source("x.py", TEXT), offset, units) == {"line": 0, "character": character}
    assert position(Source("x.py", TEXT), TEXT.index("next_line"), units) == {"line": 1, "character": 0}


def test_whole_text_edit_spans_only_the_difference_and_never_splits_crlf():
    old = "a = 1\r\nb = 2\r\nc = 3\r\n"
    new = "a = 1\r\nb = 20\r\nc = 3\r\n"
    edit = whole_text_edit(old, new, len)
    assert edit["range"]["start"]["line"] == edit["range"]["end"]["line"] == 1
    start = Source("", old).offset(2, edit["range"]["start"]["character"])
    end = Source("", old).offset(2, edit["range"]["end"]["character"])
    assert old[:start] + edit["newText"] + old[end:] == new

    joined = whole_text_edit("x\r\ny\r\n", "x\ny\r\n", len)  # the difference is inside a \r\n pair
    assert joined["range"]["start"] == {"line": 0, "character": 1} and joined["range"]["end"] == {"line": 1, "character": 0}
    assert joined["newText"] == "\n"
