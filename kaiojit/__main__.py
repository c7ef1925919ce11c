"""The command line.

``python -m kaiojit ptx file.py:kernel --sig "void(float32[:], int32)" [--arch sm_90]
[--emit kir|llvm_unoptimized|llvm|ptx|sass|resources]``: print one stage of a kernel's compile,
or its resources (ptxas's report for ``--arch``: registers, shared, local, constant bytes).

``python -m kaiojit aot file.py:kernel --sig "..." [--sig ...] [--arch sm_80,sm_90]
[--target nvptx|host] -o DIR``: export kernels (``kaiojit.aot``); several ``file.py:kernel``
may be given, each signature applying to the kernel before it.

Exit codes: 0 done, 1 the kernel does not compile or export, 2 a usage error."""

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
    a = sub.add_parser("aot", help="export kernels: cubins and PTX (or a host library), a "
                       "manifest and a C launcher")
    a.add_argument("kernels", nargs="+", metavar="FILE.py:KERNEL")
    a.add_argument("--sig", action="append", default=[], required=True,
                   help='a signature, e.g. "void(float32[::1], int32)"; repeat for more')
    a.add_argument("--arch", default="sm_90", help="comma-separated, e.g. sm_80,sm_90,sm_90a")
    a.add_argument("--target", choices=["nvptx", "host"], default="nvptx")
    a.add_argument("-o", "--out", required=True, help="the directory to write")
    args = parser.parse_args(argv)
    if args.command == "aot":
        return _aot(args)

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


def _aot(args) -> int:
    import kaiojit as kj
    from kaiojit.aot.exporter import ExportError, export
    from kaiojit.dispatcher import Dispatcher

    kernels = {}
    for spec in args.kernels:
        obj = _load_kernel(spec)
        disp = obj if isinstance(obj, Dispatcher) else kj.jit(obj)
        kernels[disp] = list(args.sig)
    try:
        manifest = export(args.out, kernels, args.arch.split(","), args.target)
    except (ExportError, kj.CompileError, TypeError, ValueError) as e:
        print(f"kaiojit aot: {e}", file=sys.stderr)
        return 1
    for e in manifest.entries:
        print(f"{e.kernel}: {e.signature} -> {e.c_name}")
    print(f"wrote {len(manifest.entries)} signature(s) for {manifest.target} "
          f"({', '.join(manifest.archs) or 'host'}) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
