"""The declarations of every intrinsic, one module per family (see ``kaiojit.kir.intrinsics``).

The registry imports this package on its first lookup; importing it imports every module in
it, in name order, and each module registers its declarations. So a new family, or a new
intrinsic in a family, is one file's change: nothing here lists them.
"""

from __future__ import annotations

import importlib
import os

for _file in sorted(os.listdir(os.path.dirname(__file__))):
    if _file.endswith(".py") and not _file.startswith("_"):
        importlib.import_module(f"{__name__}.{_file[:-3]}")
