"""pytest plugin: write the PTX of every kernel the suite compiles for the NVPTX target.

Use: ``PTX_COLLECT_DIR=/some/dir PYTHONPATH=.:<this dir> python -m pytest -p ptx_collect ...``.
It wraps ``kaiojit.compiler.compile_kernel`` (and the name ``kaiojit.dispatcher`` imported), the
function every kaiojit commit from 21bee49 on compiles a kernel through (tests/ptxas.py wraps
the same one). Each PTX goes to ``<dir>/<n>.ptx``; ``<dir>/index.tsv`` has one line a kernel:
file, test id, Python name, entry symbol, signature, options. The key that two runs are matched
by is (test id, Python name, signature, target, options, occurrence within that key).

Kernels the suite compiles for the cpu backend (the ``host`` target: every end-to-end test on a
machine without a GPU) are also compiled for ``sm_90`` on the side ("shadow" rows, target
``shadow sm_90 80``), so their PTX is compared too; ``PTX_COLLECT_SHADOW=0`` turns that off. A
shadow compile that raises writes the exception's type and message instead of PTX.
"""

from __future__ import annotations

import os

import pytest

_DIR = os.environ.get("PTX_COLLECT_DIR", "ptx_collected")
_SHADOW = os.environ.get("PTX_COLLECT_SHADOW", "1") != "0"
_STATE = {"test": "<collection>", "n": 0, "index": None}


def _clean(s: str) -> str:
    return " ".join(str(s).split()).replace("\t", " ")


def _record(text: str, pyfunc, symbol: str, signature, target: str, options, device) -> None:
    n = _STATE["n"] = _STATE["n"] + 1
    name = f"{n:05d}.ptx"
    with open(os.path.join(_DIR, name), "w") as f:
        f.write(text)
    fields = [name, _STATE["test"], getattr(pyfunc, "__qualname__", symbol), symbol,
              str(signature) + (" device" if device else ""), target, repr(options)]
    _STATE["index"].write("\t".join(_clean(x) for x in fields) + "\n")
    _STATE["index"].flush()


def _wrap(original):
    def compile_kernel(pyfunc, signature, options, spec, *args, **kwargs):
        ck = original(pyfunc, signature, options, spec, *args, **kwargs)
        device = kwargs.get("device", False)
        if getattr(ck.target, "kind", "") == "nvptx" and ck.ptx:
            _record(ck.ptx, pyfunc, ck.name, signature, f"{spec.arch} {spec.ptx_version}",
                    options, device)
        elif _SHADOW and getattr(spec, "kind", "") == "host":
            shadow = type(spec)("nvptx", "sm_90", 80)
            try:
                sk = original(pyfunc, signature, options, shadow, *args, **kwargs)
                text, symbol = sk.ptx, sk.name
            except Exception as e:  # noqa: BLE001 - the failure is what gets compared
                text, symbol = f"<error> {type(e).__name__}: {e}\n", ck.name
            _record(text, pyfunc, symbol, signature, "shadow sm_90 80", options, device)
        return ck
    compile_kernel.__wrapped__ = original
    return compile_kernel


def pytest_configure(config):
    import kaiojit
    from kaiojit import compiler, dispatcher

    os.makedirs(_DIR, exist_ok=True)
    _STATE["index"] = open(os.path.join(_DIR, "index.tsv"), "w")
    _STATE["index"].write(f"# kaiojit from {os.path.dirname(kaiojit.__file__)}\n")
    original = compiler.compile_kernel
    wrapper = _wrap(original)
    compiler.compile_kernel = wrapper
    if getattr(dispatcher, "compile_kernel", None) is original:
        dispatcher.compile_kernel = wrapper


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _STATE["test"] = item.nodeid
    yield
    _STATE["test"] = "<between tests>"


@pytest.hookimpl(hookwrapper=True)
def pytest_collectstart(collector):
    _STATE["test"] = f"<collect {collector.nodeid}>"
    yield


def pytest_unconfigure(config):
    if _STATE["index"]:
        _STATE["index"].close()
