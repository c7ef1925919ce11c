"""``python -m kaiojit ptx file.py:kernel --sig "void(float32[:], int32)" [--arch sm_90]
[--emit kir|llvm_unoptimized|llvm|ptx|sass|resources]``: print one stage of a kernel's compile,
or its resources (ptxas's report for ``--arch``: registers, shared, local, constant bytes)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys


def _load_kernel(spec: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit(f"expected FILE.py:KERNEL, got {spec!r}")
    if not os.path.exists(path):
        raise SystemExit(f"no such file: {path}")
    module_name = os.path.splitext(os.path.basename(path))[0]
    mspec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(mspec)
    sys.modules[module_name] = module
    mspec.loader.exec_module(module)
    try:
        return getattr(module, name)
    except AttributeError:
        raise SystemExit(f"{path} has no {name!r}") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kaiojit")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ptx", help="print a stage of a kernel's compile")
    p.add_argument("kernel", help="FILE.py:KERNEL")
    p.add_argument("--sig", required=True, help='e.g. "void(float32[:], int32)"')
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--emit", choices=["kir", "llvm_unoptimized", "llvm", "ptx", "sass",
                                      "resources"],
                   default="ptx", help="a stage of the nvptx pipeline, sass, or resources")
    args = parser.parse_args(argv)

    import kaiojit as kj
    from kaiojit.dispatcher import Dispatcher
    from kaiojit.sass import sass_of
    from kaiojit.target import TargetSpec, ptx_version_for

    obj = _load_kernel(args.kernel)
    disp = obj if isinstance(obj, Dispatcher) else kj.jit(obj)
    spec = TargetSpec("nvptx", args.arch, ptx_version_for(args.arch))
    try:
        ck = disp.compile(args.sig, spec)
    except kj.CompileError as e:
        print(e, file=sys.stderr)
        return 1
    if args.emit == "sass":
        print(sass_of(ck))
    elif args.emit == "resources":
        from kaiojit.resources import PtxasError, ptxas_resources
        try:
            print(str(ptxas_resources(ck.ptx, ck.target.arch, ck.name)).removeprefix("// "))
        except PtxasError as e:
            print(e, file=sys.stderr)
            return 1
    else:
        print(ck.stage(args.emit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
