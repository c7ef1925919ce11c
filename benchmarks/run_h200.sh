#!/usr/bin/env bash
# Everything GPU-side in one device call: the gpu tests, then the benchmarks, logs under $OUT.
#   bash benchmarks/run_h200.sh [tests|launch|bandwidth|multi|all]...
# numba-cuda there needs an older NumPy: a numpy 2.2 wheel carried in .whl/ is unpacked to
# /tmp/np22 and put first on the path of the processes that import numba.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.
NP22=/tmp/np22
if ls .whl/numpy-2.2*.whl >/dev/null 2>&1 && [ ! -d "$NP22" ]; then
    python3 -m pip install -q --no-index --no-deps --target "$NP22" .whl/numpy-2.2*.whl
fi
steps=${*:-all}
{
    echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
    python3 -c "import sys, llvmlite, numpy; print(sys.version.split()[0], 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)"
} | tee "$OUT/env.log"
for step in $steps; do
    case $step in
    example|all)
        timeout 120 python3 examples/saxpy.py 2>&1 | tee "$OUT/example.log" | head -3 ;;&
    tests|all)
        # the whole suite: gpu-marked tests, and the end-to-end suite on the cuda backend
        timeout 400 python3 -m pytest -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/gpu_tests.log" | tail -30 ;;&
    launch|all)
        PYTHONPATH=.:$NP22 timeout 200 python3 benchmarks/launch_overhead.py 2>&1 | tee "$OUT/launch.log" | tail -20 ;;&
    bandwidth|all)
        KAIOJIT_NUMBA_PYTHONPATH=.:$NP22 timeout 300 python3 benchmarks/bandwidth.py 2>&1 | tee "$OUT/bandwidth.log" | tail -20 ;;&
    multi|all)
        timeout 120 python3 benchmarks/multi_gpu.py 2>&1 | tee "$OUT/multi_gpu.log" | tail -6 ;;
    esac
done
