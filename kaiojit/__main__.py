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

Errors are one line on stderr, ``python -m kaiojit: error: ...`` (a compile error adds the
source line and a caret under it, as the exception does), and the exit code says which kind
(docs/cli.md):

* 0: done;
* 1: the kernel does not compile (or export) for the signature (a compile error, a signature
  that does not fit the function);
* 2: usage: bad arguments, no such file or no such kernel in it (and the cache's own usage
  errors);
* 3: the file raised while it was imported;
* 4: a tool kaiojit runs is missing or failed (ptxas, nvdisasm).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys


EXIT_OK, EXIT_COMPILE, EXIT_USAGE, EXIT_IMPORT, EXIT_TOOL = 0, 1, 2, 3, 4
PROG = "python -m kaiojit"


class CliError(Exception):
    """An error the command line reports as one line and an exit code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _load_kernel(spec: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise CliError(EXIT_USAGE, f"expected FILE.py:KERNEL, got {spec!r}")
    if not os.path.exists(path):
        raise CliError(EXIT_USAGE, f"no such file: {path}")
    module_name = os.path.splitext(os.path.basename(path))[0]
    mspec = importlib.util.spec_from_file_location(module_name, path)
    if mspec is None or mspec.loader is None:
        raise CliError(EXIT_USAGE, f"{path} is not a Python file")
    module = importlib.util.module_from_spec(mspec)
    sys.modules[module_name] = module
    try:
        mspec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file: report where it failed
        raise CliError(EXIT_IMPORT, f"importing {path} raised {_where(e, path)}"
                       f"{type(e).__name__}: {_first_line(e)}") from None
    try:
        return getattr(module, name)
    except AttributeError:
        found = sorted(n for n, v in vars(module).items()
                       if getattr(v, "_kaiojit_dispatcher", False))
        hint = f" (its kernels: {', '.join(found)})" if found else ""
        raise CliError(EXIT_USAGE, f"{path} has no {name!r}{hint}") from None


def _where(e: BaseException, path: str) -> str:
    """``at FILE:LINE: `` of the innermost frame of the user's file in ``e``'s traceback."""
    tb, line = e.__traceback__, None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"at {path}:{line}: " if line is not None else ""


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _ptx_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", help="FILE.py:KERNEL")
    p.add_argument("--sig", required=True, help='e.g. "void(float32[:], int32)"')
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--emit", choices=["kir", "llvm_unoptimized", "llvm", "ptx", "sass",
                                      "resources"],
                   default="ptx", help="a stage of the nvptx pipeline, sass, or resources")


def _ptx(args) -> int:
    print(_ptx_text(args))
    return EXIT_OK


def _ptx_text(args: argparse.Namespace) -> str:
    """The text ``python -m kaiojit ptx`` prints (CliError on failure)."""
    import kaiojit as kj
    from kaiojit.dispatcher import Dispatcher
    from kaiojit.target import MIN_ARCH, TargetSpec, parse_arch, ptx_version_for

    obj = _load_kernel(args.kernel)
    if not isinstance(obj, Dispatcher) and not callable(obj):
        raise CliError(EXIT_USAGE, f"{args.kernel} is a {type(obj).__name__}, not a kernel")
    try:
        if parse_arch(args.arch) < MIN_ARCH:
            raise ValueError(f"kaiojit compiles for sm_{MIN_ARCH} and newer")
        spec = TargetSpec("nvptx", args.arch, ptx_version_for(args.arch))
    except ValueError as e:
        raise CliError(EXIT_USAGE, f"--arch {args.arch}: {_first_line(e)}") from None
    try:
        disp = obj if isinstance(obj, Dispatcher) else kj.jit(obj)
        ck = disp.compile(args.sig, spec)
    except kj.CompileError as e:
        raise CliError(EXIT_COMPILE, str(e)) from None
    except (TypeError, ValueError) as e:  # the signature: unparsable, or the wrong arity
        raise CliError(EXIT_COMPILE, f"{args.kernel} --sig {args.sig!r}: {_first_line(e)}"
                       ) from None
    if args.emit == "sass":
        from kaiojit.tools.sass import sass_of

        try:
            return sass_of(ck)
        except (RuntimeError, OSError) as e:
            raise CliError(EXIT_TOOL, _first_line(e)) from None
        except Exception as e:  # noqa: BLE001 - ptxas or the disassembler failed
            raise CliError(EXIT_TOOL, f"{type(e).__name__}: {_first_line(e)}") from None
    if args.emit == "resources":
        from kaiojit.tools.resources import PtxasError, ptxas_resources

        try:
            return str(ptxas_resources(ck.ptx, ck.target.arch, ck.name)).removeprefix("// ")
        except PtxasError as e:
            raise CliError(EXIT_TOOL, _first_line(e)) from None
    return ck.stage(args.emit)


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
    a.add_argument("--compiler", choices=["auto", "ptxas", "driver"], default="auto",
                   help="what makes the cubins: ptxas, the CUDA driver's linker, or auto "
                        "(ptxas where found, else the driver; docs/aot.md)")
    a.add_argument("-o", "--out", required=True, help="the directory to write")


def _aot(args) -> int:
    import kaiojit as kj
    from kaiojit.aot.exporter import ExportError, export
    from kaiojit.aot.autotuned import is_autotuned
    from kaiojit.dispatcher import Dispatcher

    kernels = {}
    for spec in args.kernels:
        obj = _load_kernel(spec)
        disp = obj if isinstance(obj, Dispatcher) or is_autotuned(obj) else kj.jit(obj)
        kernels[disp] = list(args.sig)
    try:
        manifest = export(args.out, kernels, args.arch.split(","), args.target, args.compiler)
    except (ExportError, kj.CompileError, TypeError, ValueError) as e:
        raise CliError(EXIT_COMPILE, f"aot: {e}") from None
    for e in manifest.entries:
        print(f"{e.kernel}: {e.signature} -> {e.c_name}")
    made = f", cubins by {manifest.compiler_version}" if manifest.compiler else ""
    print(f"wrote {len(manifest.entries)} signature(s) for {manifest.target} "
          f"({', '.join(manifest.archs) or 'host'}{made}) to {args.out}")
    return 0


COMMANDS = {
    "ptx": ("print a stage of a kernel's compile", _ptx_arguments, _ptx),
    "aot": ("export kernels: cubins and PTX (or a host library), a manifest and a C launcher",
            _aot_arguments, _aot),
    "cache": ("list, measure or clear the disk cache", _cache_arguments, _cache),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, epilog="exit codes: 0 done, 1 compile error, "
                                     "2 usage, 3 the file raised on import, 4 a tool missing")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (words, add_arguments, _) in COMMANDS.items():
        add_arguments(sub.add_parser(name, help=words))
    args = parser.parse_args(argv)  # usage errors: argparse's one line and exit code 2
    try:
        return COMMANDS[args.command][2](args)
    except CliError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())
