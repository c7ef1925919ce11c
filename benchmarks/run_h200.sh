#!/usr/bin/env bash
# Everything GPU-side in one run on the GPU machine: the gpu tests, then the benchmarks, logs under $OUT.
#   bash benchmarks/run_h200.sh [example|tests|numba|coarse|launch|launch5|launchparts|bandwidth|probe|tma|lib|autotune|gemm|hopper|wgmma|attention|attnforms|attnbwd|torchop|coldstart|aotspeed|compile|fuzz|multi|all]...
# numba: numba-cuda's cudapy tests through kaiojit.cuda on the GPU, read from .numba_cudapy/
# (an unedited copy of numba-cuda 0.30.4's tests/cudapy, carried beside the tree; its tests/data
# in .numba_data/).
# numba-cuda there needs an older NumPy: a numpy 2.2 wheel carried in .whl/ is unpacked to
# /tmp/np22 and put first on the path of the processes that import numba.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}  # a caller's extra path (cffi) kept
NP22=/tmp/np22
if ls .whl/numpy-2.2*.whl >/dev/null 2>&1 && [ ! -d "$NP22" ]; then
    python3 -m pip install -q --no-index --no-deps --target "$NP22" .whl/numpy-2.2*.whl
fi
steps=${*:-all}
{
    echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
    python3 -c "import sys, llvmlite, numpy; print(sys.version.split()[0], 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)"
} | tee "$OUT/env.log"
peer() { KAIOJIT_NUMBA_PYTHONPATH=.:$NP22 PYTHONPATH=. "$@"; }
for step in $steps; do
    echo "== $step $(date -u +%H:%M:%S)" | tee -a "$OUT/env.log"
    case $step in
    example|all)
        timeout 120 python3 examples/saxpy.py 2>&1 | tee "$OUT/example.log" | head -3 ;;&
    tests|all)
        # the whole suite: gpu-marked tests, and the end-to-end suite on the cuda backend
        # (-v: each test's outcome as it ends, so a run stopped by its timeout still names what
        # failed; --tb=line: one line a failure at the end; TESTS_JOBS=8: pytest-xdist workers)
        # (TESTS_EACH=120: pytest-timeout's limit a test, where it is installed, so a hang
        # fails its test by name instead of stopping the run)
        jobs=${TESTS_JOBS:+-n $TESTS_JOBS}
        each=${TESTS_EACH:+--timeout $TESTS_EACH}
        timeout ${TESTS_TIMEOUT:-400} python3 -m pytest -v -p no:cacheprovider $jobs $each --tb=line -rfEs 2>&1 \
            | tee "$OUT/gpu_tests.log" | tail -40 ;;&
    numba)
        timeout ${NUMBA_TIMEOUT:-500} python3 tools/numba_suite/run.py --backend cuda --tests .numba_cudapy \
            --data .numba_data --cache /tmp/nbsuite --jobs ${NUMBA_JOBS:-6} --timeout 300 --json "$OUT/numba_cuda.json" 2>&1 \
            | tee "$OUT/numba_suite.log" | tail -8 ;;
    coarse)  # the whole suite with every launch that can through a coarse entry (kir/coarsen.py)
        KAIOJIT_COARSE_MIN_THREADS=0 timeout ${TESTS_TIMEOUT:-400} python3 -m pytest -q -p no:cacheprovider -rf 2>&1 \
            | tee "$OUT/coarse_tests.log" | tail -15 ;;
    launch|all)
        PYTHONPATH=.:$NP22 timeout 200 python3 benchmarks/launch_overhead.py 2>&1 | tee "$OUT/launch.log" | tail -20 ;;&
    launch5)
        for i in 1 2 3 4 5; do
            PYTHONPATH=.:$NP22 timeout 110 python3 benchmarks/launch_overhead.py 2>&1 | tail -32
        done | tee "$OUT/launch.log" ;;
    launchparts)
        for mode in native ex ctypes; do
            KAIOJIT_BACKEND=cuda KAIOJIT_LAUNCH=$mode timeout 100 python3 benchmarks/launch_parts.py --launches 10000 2>&1
        done | tee "$OUT/launch_parts.log" ;;
    bandwidth|all)
        peer timeout 300 python3 benchmarks/bandwidth.py 2>&1 | tee "$OUT/bandwidth.log" | tail -20 ;;&
    probe)
        timeout 200 python3 benchmarks/saxpy_probe.py 2>&1 | tee "$OUT/saxpy_probe.log" | tail -16 ;;
    tma|all)
        { timeout 60 python3 examples/tma_copy.py; timeout 120 python3 benchmarks/tma.py; } 2>&1 | tee "$OUT/tma.log" | tail -16 ;;&
    lib|all)
        { peer timeout 150 python3 benchmarks/random_rate.py; peer timeout 150 python3 benchmarks/vectorize_bw.py; timeout 150 python3 benchmarks/coop_reduce.py; } 2>&1 | tee "$OUT/lib.log" | tail -20 ;;&
    autotune|all)
        timeout 200 python3 benchmarks/autotune.py 2>&1 | tee "$OUT/autotune.log" | tail -15 ;;&
    gemm|all)
        peer timeout 560 python3 benchmarks/gemm.py 2>&1 | tee "$OUT/gemm.log" | tail -30 ;;&
    hopper)
        # the Hopper GEMM section of gemm.py alone (also at the end of the gemm step)
        timeout 500 python3 benchmarks/gemm.py --hopper 2>&1 | tee "$OUT/hopper_gemm.log" | tail -40 ;;&
    wgmma|all)
        timeout 240 python3 benchmarks/gemm_wgmma.py 2>&1 | tee "$OUT/gemm_wgmma.log" | tail -8 ;;&
    attention)  # a run of its own (~5 min): kaiojit's attention beside SDPA, Triton, flash_attn
        timeout ${ATTN_TIMEOUT:-480} python3 benchmarks/attention.py 2>&1 | tee "$OUT/attention.log" | tail -120 ;;
    attnforms)  # a run of its own (~5 min): the forward's epilogue / grid forms (regs, smem,
        # persistent) with the H100's two fastest schedules beside SDPA and Triton, forward only
        timeout ${ATTN_TIMEOUT:-360} python3 benchmarks/attention.py --no-backward --budget 200 --schedules \
            overlap,overlap+pingpong,overlap/smem,overlap+pingpong/smem,overlap/persistent,overlap+pingpong/persistent \
            2>&1 | tee "$OUT/attention_forms.log" | tail -150 ;;
    attnbwd)  # the attention backward's dQ modes side by side: atomics, reduce (TMA reduce-adds),
        # gemm only, none, and cuDNN (attention_bwd_probe.py, ~2 min)
        timeout ${ATTN_TIMEOUT:-300} python3 benchmarks/attention_bwd_probe.py 2>&1 | tee "$OUT/attention_bwd_probe.log" | tail -8 ;;
    torchop|all)
        timeout 240 python3 benchmarks/torch_op.py 2>&1 | tee "$OUT/torch_op.log" | tail -12 ;;&
    coldstart|all)
        timeout 240 python3 benchmarks/cold_start.py --target nvptx --arch sm_90a 2>&1 | tee "$OUT/cold_start.log" | tail -12 ;;&
    aotspeed|all)  # an exported cubin's kernel against the JIT's, per cubin compiler
        timeout 300 python3 benchmarks/aot_speed.py 2>&1 | tee "$OUT/aot_speed.log" | tail -16
        timeout 200 python3 -m pytest -q -m gpu tests/aot/test_export_parity.py 2>&1 \
            | tee "$OUT/aot_parity_gpu.log" | tail -3 ;;&
    compile|all)
        NUMBA_CUDA_PATH=$NP22 timeout 200 python3 benchmarks/compile_time.py 2>&1 | tee "$OUT/compile.log" | tail -12 ;;&
    fuzz)  # a run of its own: hands out programs for FUZZ_TIMEOUT - 90 s, then reports
        # (FUZZ_SIZE=elementwise with KAIOJIT_COARSE_MIN_THREADS=0: the GPU runs coarse entries)
        ft=${FUZZ_TIMEOUT:-540}
        timeout $ft python3 -m tests.fuzz --backend cuda --n ${FUZZ_N:-10000} --size ${FUZZ_SIZE:-small} --budget $((ft - 90)) \
            --out "$OUT/fuzz-failures" 2>&1 | tee "$OUT/fuzz.log" | tail -25 ;;
    multi|all)
        timeout 120 python3 benchmarks/multi_gpu.py 2>&1 | tee "$OUT/multi_gpu.log" | tail -6 ;;
    esac
done
