"""The helpers that tell kaiojit's own files from the user's (tests/located.py): they look at
kaiojit's package directory, so a checkout in a folder named ``kaiojit`` (``git clone ...
kaiojit``) does not count its tests as kaiojit's frames."""

from __future__ import annotations

import os

from tests.located import KAIOJIT_DIR, is_kaiojit_file, names_kaiojit_source


def test_a_user_file_in_a_folder_named_kaiojit_is_not_kaiojit():
    user = os.path.join("/tmp", "clone", "kaiojit", "tests", "test_mine.py")
    assert not is_kaiojit_file(user)
    assert not names_kaiojit_source(f"{user}:12:5: unsupported operand types for +")
    assert not names_kaiojit_source("kaiojit/tests/test_mine.py:12:5: bad")
    beside = KAIOJIT_DIR + "_extras" + os.sep + "types.py"  # a sibling folder, not the package
    assert not is_kaiojit_file(beside)


def test_kaiojit_source_files_are_recognized():
    types_py = os.path.join(KAIOJIT_DIR, "types.py")
    assert is_kaiojit_file(types_py)
    assert names_kaiojit_source(f"internal error at {types_py}:40")
    assert names_kaiojit_source("raised in kaiojit/frontend/typer.py, line 3")
    assert names_kaiojit_source("raised in site-packages\\kaiojit\\types.py, line 3")
