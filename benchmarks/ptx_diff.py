"""Diff the PTX two kaiojit commits produce for the same test suite.

    python benchmarks/ptx_diff.py BEFORE_DIR AFTER_DIR [--show N]

Each directory is what ``tools/ptx_collect.py`` (a pytest plugin) wrote during one suite run:
``index.tsv`` (file, test id, Python name, entry symbol, signature, target, options) and one
``.ptx`` file a kernel compiled for the NVPTX target. Kernels are matched by (test id, Python
qualified name, signature, target, options, occurrence); each pair is compared byte for byte,
then after normalizing what differs by construction:

* hashed names: the entry symbol (``saxpy_7f399f19b6ee``) and any ``name_<12 hex>``;
* string constants' names (``str_$_<8 hex>_$_<length>``): the 8 hex digits are a hash of the
  text, Python's randomized ``hash()`` before 2026-12 and its crc32 since;
* the comment block that heads the file (the generator's name and version).

Run both suites from the same directory path (for instance by ``git worktree move``-ing each
commit's worktree to one path in turn): source paths are part of the PTX (``.file`` lines,
DWARF strings, the messages of bounds checks), and a different path changes those bytes.
Exits 1 when a matched pair differs after normalization or a kernel has no partner.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections import Counter

HASHED_NAME = re.compile(r"\b([A-Za-z_]\w*?)_[0-9a-f]{12}\b")
STRING_NAME = re.compile(r"\bstr_\$_[0-9a-f]{8}_\$_(\d+)\b")


def load(folder: str) -> dict[tuple, tuple[list[str], str]]:
    """(test, qualname, signature, target, options, occurrence) -> (index row, PTX text)."""
    rows = []
    with open(os.path.join(folder, "index.tsv")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                rows.append(line.rstrip("\n").split("\t"))
    seen: Counter = Counter()
    kernels = {}
    for row in rows:
        key = (row[1], row[2], row[4], row[5], row[6])
        seen[key] += 1
        with open(os.path.join(folder, row[0])) as f:
            kernels[(*key, seen[key])] = (row, f.read())
    return kernels


def normalize(ptx: str, symbol: str) -> tuple[str, set[str]]:
    """The PTX with its by-construction differences replaced, and which kinds were found."""
    kinds = set()
    lines = ptx.splitlines()
    while lines and (lines[0].startswith("//") or not lines[0].strip()):
        lines.pop(0)
        kinds.add("header")
    text = "\n".join(lines)
    if symbol and symbol in text:
        text = text.replace(symbol, "<kernel>")
    text, n = STRING_NAME.subn(r"str_$_<hash>_$_\1", text)
    if n:
        kinds.add("string-constant names")
    text, n = HASHED_NAME.subn(r"\1_<hash>", text)
    if n:
        kinds.add("hashed names")
    return text, kinds


def compare(before: dict, after: dict, show: int) -> int:
    identical = normalized_same = 0
    why_same: Counter = Counter()
    differing = []
    for key, (brow, bptx) in before.items():
        if key not in after:
            continue
        arow, aptx = after[key]
        if bptx == aptx:
            identical += 1
            continue
        bn, bkinds = normalize(bptx, brow[3])
        an, akinds = normalize(aptx, arow[3])
        if bn == an:
            normalized_same += 1
            changed = [k for k in sorted(bkinds | akinds) if _differs(bptx, aptx, k)]
            why_same[", ".join(changed) or "header"] += 1
        else:
            differing.append((key, brow, arow, bn, an))
    only_before = [k for k in before if k not in after]
    only_after = [k for k in after if k not in before]
    matched = len(before) - len(only_before)
    print(f"kernels: {len(before)} before, {len(after)} after, {matched} matched")
    print(f"  byte-identical:                {identical}")
    print(f"  identical after normalization: {normalized_same}")
    for why, n in why_same.most_common():
        print(f"    {n} differ only in: {why}")
    print(f"  different:                     {len(differing)}")
    for label, keys in (("only before", only_before), ("only after", only_after)):
        for k in keys:
            print(f"  {label}: {k[0]} :: {k[1]} {k[2]} (#{k[5]})")
    for key, brow, arow, bn, an in differing:
        print(f"\n=== {key[0]} :: {key[1]} {key[2]} (#{key[5]}): {brow[0]} vs {arow[0]}")
        diff = list(difflib.unified_diff(bn.splitlines(), an.splitlines(), "before", "after",
                                         lineterm="", n=1))
        for line in diff[:show]:
            print(line)
        if len(diff) > show:
            print(f"... {len(diff) - show} more diff lines")
    return 1 if differing or only_before or only_after else 0


def _differs(bptx: str, aptx: str, kind: str) -> bool:
    """Whether the two texts differ in what ``kind`` normalizes."""
    if kind == "header":
        return _head(bptx) != _head(aptx)
    pattern = STRING_NAME if kind == "string-constant names" else HASHED_NAME
    return [m.group(0) for m in pattern.finditer(bptx)] != [m.group(0) for m in pattern.finditer(aptx)]


def _head(ptx: str) -> list[str]:
    lines = ptx.splitlines()
    return lines[:next((i for i, ln in enumerate(lines) if ln.startswith(".")), len(lines))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--show", type=int, default=60, help="diff lines shown a difference")
    args = parser.parse_args(argv)
    return compare(load(args.before), load(args.after), args.show)


if __name__ == "__main__":
    sys.exit(main())
