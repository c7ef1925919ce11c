#!/bin/sh
# Collect the PTX of a suite run at two commits from ONE directory path, then diff them.
#   tools/ptx_run.sh BEFORE_WORKTREE AFTER_WORKTREE OUT_DIR [TEST_PATHS...]
# Each worktree is moved (git worktree move) to OUT_DIR/run for its run and moved back, so
# source paths in the PTX are the same. Run BEFORE's tests at both: put them in AFTER first.
set -u
before=$(realpath "$1"); after=$(realpath "$2"); out=$(realpath "$3"); shift 3
tools=$(dirname "$(realpath "$0")")
mkdir -p "$out"
for side in before after; do
    tree=$(eval echo \$$side)
    rm -rf "$out/$side" "$out/cache-$side"
    git -C "$tree" worktree move "$tree" "$out/run" || exit 2
    (cd "$out/run" && PTX_COLLECT_DIR="$out/$side" KAIOJIT_CACHE_DIR="$out/cache-$side" \
        PYTHONPATH=".:$tools" python -m pytest -q -p no:cacheprovider -p ptx_collect "$@" \
        > "$out/$side.log" 2>&1; tail -1 "$out/$side.log")
    git -C "$out/run" worktree move "$out/run" "$tree" || exit 2
done
python "$tools/../benchmarks/ptx_diff.py" "$out/before" "$out/after"
