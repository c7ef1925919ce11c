"""Which C functions host object code may call: a fixed allow-list, and the undefined symbols
of an ELF object file.

The cpu backend links host object code into the process with MCJIT, whose linker resolves an
undefined symbol against anything the process has (``system`` included). Code kaiojit has just
compiled calls only what its lowering emits; code read back from the disk cache is checked
first: every symbol it leaves undefined, and every C function its entry names, must be one of
:data:`HOST_C_FUNCTIONS` (libm's math, what LLVM emits for memory and half-precision
conversions, the few libc calls intrinsics make) or one of kaiojit's own native functions.
"""

from __future__ import annotations

import struct

_MATH = ("sqrt", "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
         "tgamma", "lgamma", "atan2", "pow", "hypot", "copysign", "fmod", "floor", "ceil",
         "trunc", "rint", "fabs", "fma", "exp2", "fmin", "fmax", "round", "nearbyint", "cbrt",
         "sincos", "ldexp", "frexp", "remainder", "logb", "ilogb", "scalbn", "nextafter")
MATH_FUNCTIONS = frozenset(_MATH) | frozenset(name + "f" for name in _MATH)

# what LLVM's code generation calls on its own (memory intrinsics, conversions and wide
# arithmetic it does not inline), and the libc calls intrinsics' host lowerings make
# (``host_symbols`` of kaiojit/intrinsics: cg.py, timers.py)
# (syscall: the cpu backend's grid barrier sleeps on a futex, kaiojit/intrinsics/cg.py; it stays
# a libc call so that host libraries exported by kaiojit.aot run in a plain C program)
_RUNTIME = ("memcpy", "memmove", "memset", "snprintf", "sched_yield", "nanosleep", "syscall",
            "clock_gettime", "__truncsfhf2", "__truncdfhf2", "__extendhfsf2", "__gnu_h2f_ieee",
            "__gnu_f2h_ieee", "__truncsfbf2", "__truncdfbf2", "__powisf2", "__powidf2",
            "__divti3", "__udivti3", "__modti3", "__umodti3", "__muloti4", "__fixsfti",
            "__fixdfti", "__fixunssfti", "__fixunsdfti", "__floattisf", "__floattidf",
            "__floatuntisf", "__floatuntidf", "__mulsc3", "__muldc3", "__divsc3", "__divdc3")
HOST_C_FUNCTIONS = MATH_FUNCTIONS | frozenset(_RUNTIME)

OWN_SYMBOL_PREFIX = "kaiojit_"  # native functions kaiojit itself defines and registers


def host_symbol_allowed(name: str) -> bool:
    """Whether host code may call ``name``: an allowed C function, or one of kaiojit's own
    (registered by kaiojit by address; nothing else in the process has such a name)."""
    return name in HOST_C_FUNCTIONS or name.startswith(OWN_SYMBOL_PREFIX)


def undefined_symbols(object_code: bytes) -> frozenset[str]:
    """The names an ELF64 little-endian relocatable object leaves undefined (what the linker
    must resolve). ValueError if ``object_code`` is not such an object."""
    if object_code[:4] != b"\x7fELF" or object_code[4:6] != b"\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF object")
    try:
        shoff, = struct.unpack_from("<Q", object_code, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", object_code, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, shoff + i * shentsize)
                    for i in range(shnum)]
        names = set()
        for sh in sections:
            if sh[1] != 2:  # SHT_SYMTAB
                continue
            _, _, _, _, offset, size, link, _, _, entsize = sh
            strtab = sections[link]
            str_off, str_size = strtab[4], strtab[5]
            for at in range(offset, offset + size, entsize or 24):
                st_name, _info, _other, shndx = struct.unpack_from("<IBBH", object_code, at)
                if shndx != 0 or st_name == 0:  # defined, or the null symbol
                    continue
                if st_name >= str_size:
                    raise ValueError("a symbol name outside the string table")
                start = str_off + st_name
                end = object_code.index(b"\0", start, str_off + str_size)
                names.add(object_code[start:end].decode("ascii"))
        return frozenset(names)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"a damaged ELF object ({type(e).__name__}: {e})") from None


__all__ = ["HOST_C_FUNCTIONS", "MATH_FUNCTIONS", "OWN_SYMBOL_PREFIX", "host_symbol_allowed",
           "undefined_symbols"]
