"""Loading host object code (runtime/hostjit.py): a HostImage built here from hand-written LLVM
IR, no kaiojit compiler involved, links into the process and its entry runs."""

from __future__ import annotations

import ctypes
import math
import random
import threading

import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from kaiojit.runtime.hostjit import load_host_image
from kaiojit.target import HostImage, host_target_machine

I64, F64, PTR = ir.IntType(64), ir.DoubleType(), ir.PointerType()


def entry_image(name: str) -> HostImage:
    """``void name(slots, ctx, first, end)``: ``*slots[0] = end - first`` and
    ``*slots[1] = erf(end)``, erf from libm (an external symbol the loader resolves)."""
    module = ir.Module(name)
    module.triple = llvm.get_process_triple()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64]), name)
    erf = ir.Function(module, ir.FunctionType(F64, [F64]), "erf")
    slots, _, first, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    count_at = b.load(slots, typ=PTR)
    erf_at = b.load(b.gep(slots, [ir.Constant(I64, 1)], source_etype=I64), typ=PTR)
    b.store(b.sub(end, first), count_at)
    b.store(b.call(erf, [b.sitofp(end, F64)]), erf_at)
    b.ret_void()
    code = host_target_machine().emit_object(llvm.parse_assembly(str(module)))
    return HostImage(object_code=code, entry=name, uses_block_mode=False,
                     static_shared_bytes=0)


def run_entry(run, first: int, end: int) -> tuple[int, float]:
    count, value = ctypes.c_int64(-7), ctypes.c_double(math.nan)  # poisoned
    slots = (ctypes.c_void_p * 2)(ctypes.addressof(count), ctypes.addressof(value))
    run(ctypes.addressof(slots), None, first, end)
    return count.value, value.value


def test_a_loaded_image_runs_its_entry_and_calls_libm():
    code = load_host_image(entry_image("span_run"))
    assert code.address and code.image.entry == "span_run"
    first = random.randrange(-1000, 1000)
    end = first + random.randrange(1, 1000)
    count, value = run_entry(code.run, first, end)
    assert count == end - first
    assert value == pytest.approx(math.erf(end), rel=1e-15)


def test_images_load_from_several_threads_at_once():
    images = [entry_image(f"span_{i}_run") for i in range(4)]
    codes: list = [None] * len(images)

    def load(i: int) -> None:
        codes[i] = load_host_image(images[i])

    threads = [threading.Thread(target=load, args=(i,)) for i in range(len(images))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, code in enumerate(codes):
        end = random.randrange(10, 99)
        assert run_entry(code.run, i, end) == (end - i, pytest.approx(math.erf(end), rel=1e-15))


def test_a_missing_entry_is_named():
    image = entry_image("span_run")
    image.entry = "other_run"
    with pytest.raises(RuntimeError, match="host object code has no entry 'other_run'"):
        load_host_image(image)
