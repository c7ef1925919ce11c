"""The command line.

``python -m kaiojit ptx file.py:kernel --sig "void(float32[:], int32)" [--arch sm_90]
[--emit kir|llvm_unoptimized|llvm|ptx|sass|resources]``: print one stage of a kernel's compile,
or its resources (ptxas's report for ``--arch``: registers, shared, local, constant bytes).

``python -m kaiojit aot file.py:kernel --sig "..." [--sig ...] [--arch sm_80,sm_90]
[--target nvptx|host] -o DIR``: export kernels (``kaiojit.aot``); several ``file.py:kernel``
may be given, each signature applying to the kernel before it.

``python -m kaiojit cache list|size|clear``: the disk cache's entries (newest use first), its
size against its limit, or delete it all (docs/cache.md).

Each subcommand is an entry of :data:`COMMANDS`: its help, a function adding its arguments to
its parser, and one running it and returning the exit status.

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


def _ptx_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", help="FILE.py:KERNEL")
    p.add_argument("--sig", required=True, help='e.g. "void(float32[:], int32)"')
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--emit", choices=["kir", "llvm_unoptimized", "llvm", "ptx", "sass",
                                      "resources"],
                   default="ptx", help="a stage of the nvptx pipeline, sass, or resources")


def _ptx(args) -> int:
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


def _cache_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["list", "size", "clear"],
                   help="list the entries, print the size, or delete every entry")


def _cache(args) -> int:
    import time

    from kaiojit import cachefiles
    from kaiojit.options import cache_dir

    root = cache_dir()
    if args.action == "clear":
        freed = cachefiles.clear()
        print(f"deleted {_size(freed)} from {root}")
        return 0
    try:
        limit = cachefiles.size_limit()
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    found = sorted(cachefiles.files(read_headers=args.action == "list"),
                   key=lambda f: f.used, reverse=True)
    total = sum(f.size for f in found)
    if args.action == "list":
        for f in found:
            about = f.about
            what = " ".join(str(about[k]) for k in ("what", "kind", "name") if k in about)
            if about.get("untrusted") or about.get("damaged"):
                what = "untrusted (not read)" if about.get("untrusted") else "damaged"
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(f.used))
            print(f"{when}  {_size(f.size):>9}  {os.path.relpath(f.path, root)}  {what}")
    print(f"{root}: {len(found)} files, {_size(total)} (limit {_size(limit)}, "
          f"{cachefiles.SIZE_ENV})")
    return 0


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _aot_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("kernels", nargs="+", metavar="FILE.py:KERNEL")
    a.add_argument("--sig", action="append", default=[], required=True,
                   help='a signature, e.g. "void(float32[::1], int32)"; repeat for more')
    a.add_argument("--arch", default="sm_90", help="comma-separated, e.g. sm_80,sm_90,sm_90a")
    a.add_argument("--target", choices=["nvptx", "host"], default="nvptx")
    a.add_argument("-o", "--out", required=True, help="the directory to write")


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


COMMANDS = {
    "ptx": ("print a stage of a kernel's compile", _ptx_arguments, _ptx),
    "aot": ("export kernels: cubins and PTX (or a host library), a manifest and a C launcher",
            _aot_arguments, _aot),
    "cache": ("list, measure or clear the disk cache", _cache_arguments, _cache),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kaiojit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (words, add_arguments, _) in COMMANDS.items():
        add_arguments(sub.add_parser(name, help=words))
    args = parser.parse_args(argv)
    return COMMANDS[args.command][2](args)


if __name__ == "__main__":
    sys.exit(main())
