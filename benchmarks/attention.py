"""Attention forward (and backward) TFLOP/s: kaiojit.lib.attention beside PyTorch's
scaled_dot_product_attention with each backend it has (cuDNN, flash, efficient), a Triton
fused-attention kernel (benchmarks/_triton_attention.py: the tutorial's algorithm) and
FlashAttention's package when it imports (flash_attn_interface: FA3; flash_attn: FA2).

batch 8, 16 heads, bfloat16 (``--dtype f16`` for float16), sequence 1K-16K, head dims 64 and
128, causal and not. FLOPs: ``4 * batch * heads * seqlen^2 * head_dim`` forward (half of it
causal), 2.5x that backward (FlashAttention's convention); fraction of 989 TFLOP/s (H100/H200
dense bf16). Each implementation's output is checked against the fastest SDPA backend's on the
same inputs before it is timed (CUDA events, median, two input sets so L2 holds neither); each
row is guarded, so one failure prints its error and the sweep goes on.

kaiojit's forward is timed once per variant (``--schedules``): a consumer schedule of
``forward.SCHEDULES`` (serial, overlap, pingpong, overlap+pingpong), optionally with an
epilogue / grid form of ``forward.FORMS`` after a slash (``overlap/smem``; none: ``regs``, O
stored from registers). The default: all four schedules with ``regs``, and overlap and
overlap+pingpong with each other form. Each is first launched in a child process with a time
limit (a variant that hangs or errs is dropped, the rest go on); each shape's ratio line names
the fastest, and the run ends with a tally of the fastest variant per (head dim, causal), what
``forward.SCHEDULE_BY_HEAD_DIM`` and ``forward.FORM_BY_HEAD_DIM`` should say.

    PYTHONPATH=. python3 benchmarks/attention.py                 # the whole sweep
    PYTHONPATH=. python3 benchmarks/attention.py --seqs 1024,4096 --dims 128 --no-backward
    PYTHONPATH=. python3 benchmarks/attention.py --schedules overlap,overlap/smem
    KAIOJIT_BACKEND=cpu PYTHONPATH=. python3 benchmarks/attention.py --check   # no GPU
    PYTHONPATH=. python3 benchmarks/attention.py --resources   # ptxas and SASS, no GPU
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import traceback

import numpy as np

PEAK = 989.0  # TFLOP/s, dense bf16/fp16, H100 SXM and H200
BATCH, HEADS = 8, 16


def flops(seqlen: int, d: int, causal: bool, backward: bool) -> float:
    f = 4.0 * BATCH * HEADS * seqlen * seqlen * d * (0.5 if causal else 1.0)
    return 2.5 * f if backward else f


def timed(fn, sets, reps: int) -> float:
    """Median seconds of ``fn(*set)`` over ``reps`` runs, alternating the input sets."""
    import torch
    for i in range(2):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*sets[i % len(sets)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def autograd_step(forward):
    """A backward maker for a differentiable ``forward(q, k, v, causal)``: runs the forward
    once, then gives a step that runs its backward (the graph kept for the next step)."""
    def make(q, k, v, causal, do):
        import torch
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        out = forward(q, k, v, causal)
        return lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
    return make


def variant(name: str) -> tuple[str, str]:
    """(schedule, form) of a variant's name: ``"overlap"``, ``"overlap/smem"``."""
    schedule, _, form = name.partition("/")
    return schedule, form or "regs"


def default_variants() -> list:
    """Every schedule with the register epilogue; overlap and overlap+pingpong (the H100's
    fastest) with each other form."""
    from kaiojit.lib.attention import forward as F
    return list(F.SCHEDULES) + [f"{s}/{f}" for f in F.FORMS if f != "regs"
                                for s in ("overlap", "overlap+pingpong")]


def scheduled(name: str):
    """kaiojit's forward in variant ``name`` (see ``variant``: each a kernel of its own,
    compiled once)."""
    from kaiojit.lib import attention as A
    from kaiojit.lib.attention import forward as F
    schedule, form = variant(name)

    def run(q, k, v, causal):
        d = q.shape[-1]
        saved = F.SCHEDULE_BY_HEAD_DIM[d], F.FORM_BY_HEAD_DIM[d]
        F.SCHEDULE_BY_HEAD_DIM[d], F.FORM_BY_HEAD_DIM[d] = schedule, form
        try:
            return A.attention(q, k, v, causal=causal)
        finally:
            F.SCHEDULE_BY_HEAD_DIM[d], F.FORM_BY_HEAD_DIM[d] = saved
    return run


def implementations(with_triton: bool, schedules=()):
    """name -> forward(q, k, v, causal) on (batch, seqlen, heads, dim) tensors, returning the
    output in that layout (kaiojit's once per schedule of ``schedules``); and name -> backward
    maker where one exists."""
    import torch.nn.functional as F

    from kaiojit.lib import attention as A

    fwd, bwd = {}, {}
    for schedule in schedules:
        fwd[f"kaiojit {schedule}"] = scheduled(schedule)
    if hasattr(A, "attention_backward"):
        def kj_bwd(q, k, v, causal, do):
            out, lse = A.attention(q, k, v, causal=causal, return_lse=True)
            return lambda: A.attention_backward(do, q, k, v, out, lse, causal=causal)
        bwd["kaiojit"] = kj_bwd
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = {"sdpa cudnn": SDPBackend.CUDNN_ATTENTION,
                    "sdpa flash": SDPBackend.FLASH_ATTENTION,
                    "sdpa efficient": SDPBackend.EFFICIENT_ATTENTION}
    except ImportError:
        backends = {}
    for name, backend in backends.items():
        def sdpa(q, k, v, causal, backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(
                    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                    is_causal=causal).transpose(1, 2)
        fwd[name] = sdpa
        bwd[name] = autograd_step(sdpa)
    if with_triton:
        try:
            sys.path.insert(0, os.path.dirname(__file__))
            import _triton_attention as T
            fwd["triton (tutorial)"] = lambda q, k, v, causal: T.attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal)[0].transpose(1, 2)

            def triton_bwd(q, k, v, causal, do):
                q, k, v, do = (x.transpose(1, 2) for x in (q, k, v, do))
                out, lse = T.attention(q, k, v, causal)
                return lambda: tuple(g.transpose(1, 2) for g in
                                     T.attention_backward(do, q, k, v, out, lse, causal))
            bwd["triton (tutorial)"] = triton_bwd
        except Exception as e:  # noqa: BLE001 - a peer that does not import is reported
            print(f"  triton: not importable ({type(e).__name__}: {e})")
    for module, label in (("flash_attn_interface", "flash_attn 3"), ("flash_attn", "flash_attn 2")):
        try:
            fa = __import__(module)
        except Exception as e:  # noqa: BLE001 - not installed: the next one
            print(f"  {label}: not importable ({type(e).__name__})")
            continue

        def fa_fwd(q, k, v, causal, fa=fa):
            out = fa.flash_attn_func(q, k, v, causal=causal)
            return out[0] if isinstance(out, tuple) else out
        fwd[label] = fa_fwd
        bwd[label] = autograd_step(fa_fwd)
        break
    return fwd, bwd


def sweep(seqs, dims, causals, dtype: str, backward: bool, reps: int,
          budget: float = 420.0, schedules=None) -> None:
    import torch

    tt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    working = kaiojit_runs(default_variants() if schedules is None else schedules, dtype)
    fwd, bwd = implementations(with_triton=True, schedules=working)
    if not working:
        bwd.pop("kaiojit", None)
    print(f"attention, batch {BATCH}, {HEADS} heads, {dtype}; TFLOP/s (fraction of {PEAK:.0f})")
    print(f"  {torch.cuda.get_device_name()}; implementations: {', '.join(fwd)}")
    start = time.time()
    wins: dict = {}
    for s in seqs:  # the short sequences of every shape first: a cut-off run keeps them
        for d in dims:
            for causal in causals:
                if time.time() - start > budget:
                    print(f"d={d} causal={causal} seq={s}: skipped, past the {budget:.0f} s "
                          "budget", flush=True)
                    continue
                best = run_shape(fwd, bwd if backward else {}, s, d, causal, tt, reps)
                ours = {k: v for k, v in best.items() if k.startswith("kaiojit") and v}
                if ours:
                    wins.setdefault((d, causal), []).append(max(ours, key=ours.get))
                torch.cuda.empty_cache()
    for (d, causal), names in sorted(wins.items()):
        tally = ", ".join(f"{n.split(' ', 1)[1]} {names.count(n)}" for n in sorted(set(names)))
        print(f"fastest kaiojit variant, d={d} causal={causal}: {tally} (of {len(names)} "
              "sequence lengths)", flush=True)


def run_shape(fwd: dict, bwd: dict, s: int, d: int, causal: bool, tt, reps: int) -> dict:
    """The rows of one shape: each forward, then each backward, checked against the first
    SDPA backend's result, then timed. The forwards' TFLOP/s by name (None: failed)."""
    import torch
    gen = torch.Generator(device="cuda").manual_seed(s + d)
    sets = [tuple(torch.randn(BATCH, s, HEADS, d, device="cuda", dtype=tt, generator=gen)
                  for _ in range(3)) for _ in range(2)]
    head = f"d={d:3d} {'causal' if causal else 'full  '} seq={s:5d}"
    ref = _reference(fwd, sets[0], causal)
    best = {}
    for name, f in fwd.items():
        def check(name=name, f=f):
            if ref is not None and not name.startswith("sdpa"):
                _assert_close(f(*sets[0], causal), ref, "output")
            return lambda q, k, v: f(q, k, v, causal), sets, reps
        best[name] = _row(f"{head} fwd {name:26s}", check, flops(s, d, causal, False))
    _ratio_line(head, "fwd", best)
    if not bwd:
        return best
    do = torch.randn(BATCH, s, HEADS, d, device="cuda", dtype=tt, generator=gen)
    ref_grads = _reference(bwd, sets[0], causal, grads=do)
    fb = {}
    for name, make in bwd.items():
        def check(name=name, make=make):
            step = make(*sets[0], causal, do)
            grads = step()
            if ref_grads is not None and not name.startswith("sdpa"):
                for what, g, r in zip(("dq", "dk", "dv"), grads, ref_grads):
                    _assert_close(g, r, what)
            return lambda *_: step(), sets[:1], max(reps // 2, 3)
        fb[name] = _row(f"{head} bwd {name:26s}", check, flops(s, d, causal, True))
    _ratio_line(head, "bwd", fb)
    return best


def _assert_close(got, want, what: str) -> None:
    err = float((got.float() - want).abs().max() / want.abs().max())
    assert err < 3e-2, f"{what} differs from SDPA's by {err:.3g} of its largest element"


def _row(label: str, check, work: float) -> float | None:
    """Check, then time one row and print it; a failure prints its error (the run goes on).
    ``check()`` gives (fn, input sets, reps) once the result is checked."""
    try:
        fn, sets, reps = check()
        t = timed(fn, sets, reps)
        tf = work / t / 1e12
        print(f"{label} {tf:7.1f} TFLOP/s {tf / PEAK:6.1%}  {t * 1e3:8.3f} ms", flush=True)
        return tf
    except Exception as e:  # noqa: BLE001 - one failure does not stop the run
        print(f"{label} failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
        return None


def _reference(table: dict, inputs: tuple, causal: bool, grads=None):
    """The first SDPA backend's output (or, given the upstream gradient ``grads``, the
    gradients) that runs, in float32; None if none does."""
    for name, f in table.items():
        if name.startswith("sdpa"):
            try:
                if grads is not None:
                    return [g.float() for g in f(*inputs, causal, grads)()]
                return f(*inputs, causal).float()
            except Exception as e:  # noqa: BLE001 - the next backend
                print(f"  {name}: no reference ({type(e).__name__})")
    return None


SMOKE = """
import sys
import torch
from kaiojit.lib import attention as A
from kaiojit.lib.attention import forward as F
dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[sys.argv[1]]
F.PERSISTENT_BLOCKS = 2  # persistent: 3 items a block, its barriers' phases across items
for name in sys.argv[2:]:
    print("smoke start", name, flush=True)
    schedule, _, form = name.partition("/")
    for d in (64, 128):
        F.SCHEDULE_BY_HEAD_DIM[d] = schedule
        F.FORM_BY_HEAD_DIM[d] = form or "regs"
        q, k, v = (torch.randn(1, 300, 2, d, device="cuda", dtype=dtype) for _ in range(3))
        for causal in (False, True):
            out = A.attention(q, k, v, causal=causal)
            ref = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2).float(), k.transpose(1, 2).float(),
                v.transpose(1, 2).float(), is_causal=causal).transpose(1, 2)
            err = float((out.float() - ref).abs().max())
            print("smoke", name, "d", d, "causal", causal, "max error", err, flush=True)
            assert err < 3e-2
    print("smoke ok", name, flush=True)
"""


def kaiojit_runs(schedules: list, dtype: str = "bf16", limit: float = 150.0) -> list:
    """A first kaiojit launch of each schedule (``dtype``, head dims 64 and 128, causal and
    not, 300 rows: every phase of the loop) in a child process with a time limit: a kernel
    that hangs (a barrier never completing) must not hang the unattended sweep. A child runs
    the schedules in turn; one that fails or hangs is dropped and a new child goes on with the
    next. The schedules that ran right, in order."""
    import subprocess
    ok, left = [], list(schedules)
    while left:
        try:
            r = subprocess.run([sys.executable, "-c", SMOKE, dtype, *left], capture_output=True,
                               text=True, timeout=limit, check=False)
            out = r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            out += f"\n(the smoke test did not finish in {limit:.0f} s)"
        print("  " + out.strip().replace("\n", "\n  ")[-2000:], flush=True)
        passed = [n for n in left if f"smoke ok {n}\n" in out + "\n"]
        ok += passed
        tried = [n for n in left if f"smoke start {n}\n" in out + "\n"]
        failed = [n for n in tried if n not in passed]
        if failed:
            print(f"  kaiojit schedule {failed[0]}: dropped (failed or hung)", flush=True)
        left = left[len(tried):] if tried else []
    return ok


def _ratio_line(head: str, kind: str, best: dict) -> None:
    sdpa = [v for k, v in best.items() if k.startswith("sdpa") and v]
    ours = [v for k, v in best.items() if k.startswith("kaiojit") and v]
    if ours and sdpa:
        name = max((k for k, v in best.items() if k.startswith("kaiojit") and v), key=best.get)
        print(f"{head} {kind} kaiojit (best: {name}) / fastest SDPA: "
              f"{max(ours) / max(sdpa):.2f}x", flush=True)


def check() -> None:
    """No GPU: kaiojit's forward on the cpu backend against a float64 reference."""
    import torch

    from kaiojit.lib import attention as A
    rng = np.random.default_rng()
    for d, causal in ((64, False), (128, True)):
        q, k, v = (torch.from_numpy(rng.standard_normal((1, 130, 2, d)).astype(np.float32))
                   .bfloat16() for _ in range(3))
        out = A.attention(q, k, v, causal=causal).double().numpy()
        q64, k64, v64 = (x.double().numpy()[0] for x in (q, k, v))
        s = np.einsum("qhd,khd->hqk", q64, k64) / math.sqrt(d)
        if causal:
            s = np.where(np.tril(np.ones((130, 130), bool))[None], s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        want = np.einsum("hqk,khd->qhd", p / p.sum(-1, keepdims=True), v64)
        err = float(np.abs(out[0] - want).max())
        assert err < 4 * 2 ** -8 * np.abs(v64).max(), err
        print(f"d={d} causal={causal}: max error {err:.2e} on the {os.environ.get('KAIOJIT_BACKEND', 'default')} backend")


def resources(schedules=None) -> None:
    """No GPU needed: ptxas's registers, spills and numbered notes (sm_90a) of every kernel
    configuration, and for the forward's split (GPU) form an outline of its SASS loop: the
    exponentials computed under a P V GEMM, the named barriers; the backward in both dQ
    modes."""
    from kaiojit.lib.attention import backward as B
    from kaiojit.lib.attention import forward as F
    from kaiojit.lib.attention import inspect
    from kaiojit.tools.resources import ptxas_notes, ptxas_resources
    from kaiojit.tools.sass import sass_of_ptx
    for d in (64, 128):
        for causal in (False, True):
            for name in schedules or default_variants():
                schedule, form = variant(name)
                for lockstep in (False, True):
                    cfg = F.ForwardConfig.scheduled(d, "bf16", causal, False, schedule, lockstep,
                                                    form)
                    ptx = inspect.forward_ptx(cfg)
                    r = ptxas_resources(ptx, "sm_90a")
                    notes = ",".join(sorted({c for c, _ in ptxas_notes(ptx, "sm_90a")}))
                    line = (f"forward  d={d:3d} causal={causal:d} {name:27s} "
                            f"{'lockstep' if lockstep else 'split':8s} {r.registers} regs, "
                            f"spill {r.spill_store_bytes}/{r.spill_load_bytes} B, notes: "
                            f"{notes or 'none'}")
                    if not lockstep:
                        sass = sass_of_ptx(ptx, "sm_90a")
                        outline = inspect.sass_outline(sass)
                        bars = sum(e.startswith("BAR.") for e in outline)
                        line += (f"; SASS: R0-R{inspect.highest_register(sass) - 1}, "
                                 f"{inspect.softmax_under_pv(outline)} EX2 under P V, "
                                 f"{bars} named-barrier ops")
                    print(line, flush=True)
            for dq in ("atomics", "reduce"):
                ptx = inspect.backward_ptx(B.BackwardConfig(d, "bf16", causal, False, dq=dq))
                r = ptxas_resources(ptx, "sm_90a")
                notes = ",".join(sorted({c for c, _ in ptxas_notes(ptx, "sm_90a")}))
                print(f"backward d={d:3d} causal={causal:d} dq={dq:7s} {r.registers} regs, "
                      f"spill {r.spill_store_bytes}/{r.spill_load_bytes} B, notes: "
                      f"{notes or 'none'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds after which the remaining shapes are skipped")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--resources", action="store_true")
    ap.add_argument("--schedules", default=None,
                    help="kaiojit forward variants to time, comma-separated: a schedule "
                         "(serial, overlap, pingpong, overlap+pingpong), /form optional "
                         "(regs, smem, ...; default: see default_variants)")
    args = ap.parse_args()
    schedules = args.schedules.split(",") if args.schedules else None
    if args.check:
        check()
        return
    if args.resources:
        resources(schedules)
        return
    t0 = time.time()
    try:
        sweep([int(x) for x in args.seqs.split(",")], [int(x) for x in args.dims.split(",")],
              [bool(int(x)) for x in args.causal.split(",")], args.dtype,
              not args.no_backward, args.reps, args.budget, schedules)
    except Exception:  # noqa: BLE001 - the unattended run keeps its log
        traceback.print_exc()
    print(f"sweep took {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
