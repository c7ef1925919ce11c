"""The C launcher of an export: ``kaiojit_kernels.h`` and ``kaiojit_kernels.c``.

The header declares one typed launch function per exported signature and is the same for both
targets, so a C or C++ program is written once. Arrays are a pointer plus their shape (and,
layout 'A', their strides in bytes); scalars come by value (float16, bfloat16 and fp8 as their
bits); a tensor map as a pointer to its 128 bytes. An array of records (a NumPy structured
dtype) is a pointer too; the header defines a C struct of the record's exact layout, named by a
hash of it (``kaiojit_rec<hash>``), with its size and offsets checked by the C compiler. The
function writes them into kaiojit's 8-byte parameter slots (``kaiojit.runtime.slots``: a tensor
map on a 64-byte boundary) and launches.

The GPU source is written on the CUDA driver API (``cuda.h``, link ``-lcuda``): it embeds each
signature's cubins and PTX, picks the cubin for the current device and falls back to the
driver's JIT of the PTX. A kernel exported with a coarse entry launches it for large grids by
the JIT's rule (``KAIOJIT_COARSE_MIN_THREADS`` included), as the Python loader does. The host
source (``-lkaiojit_kernels -lpthread``) runs the exported host code as the cpu backend does:
the grid's blocks on a thread with a large stack, or every block on a thread of its own when
the kernel synchronizes its grid.
"""

from __future__ import annotations

import hashlib
import os

from kaiojit import env
from kaiojit import target as H
from kaiojit import types as kt
from kaiojit.aot.manifest import Entry, Manifest
from kaiojit.runtime.slots import SlotLayout

_COARSE_KNOB = env.KNOBS["KAIOJIT_COARSE_MIN_THREADS"]  # the C launcher reads it as the JIT does
HEADER = "kaiojit_kernels.h"
SOURCE = "kaiojit_kernels.c"

def _scalar_c(t: kt.ScalarType) -> str:
    """The C type of a scalar parameter, from the type's own facts: bool, the <stdint.h>
    integers, float and double; a float format C99 has no type for (IEEE half, and those
    kaiojit encodes itself: bfloat16, fp8) travels as its bits."""
    if t.is_bool:
        return "bool"
    if t.is_int:
        return f"{'u' if t.kind == 'u' else ''}int{t.bits}_t"
    if t.is_float and t.facts.encode is None and t.bits in (32, 64):
        return "float" if t.bits == 32 else "double"
    if t.is_float:
        return f"uint{t.bits}_t"
    raise ValueError(f"no C type for {t}")


def c_parameters(entry: Entry) -> tuple[list[str], list[tuple[str, str]]]:
    """The C parameter declarations of ``entry``'s launch function, and per kernel parameter
    (slot order) the C expression whose bytes go into its slot and the C type of that value."""
    sig = kt.parse_signature(entry.signature)
    decls: list[str] = []
    writes: list[tuple[str, str]] = []
    for t, name in zip(sig.args, entry.arg_names):
        if isinstance(t, kt.ArrayType):
            of = f" /* of {record_struct(t.dtype)} */" if isinstance(t.dtype, kt.RecordType) \
                else ""
            decls.append(f"void *{name}{of}")
            writes.append((f"(uint64_t)(uintptr_t){name}", "uint64_t"))
            decls.append(f"const int64_t {name}_shape[{t.ndim}]")
            writes += [(f"{name}_shape[{i}]", "int64_t") for i in range(t.ndim)]
            if t.passes_strides:
                decls.append(f"const int64_t {name}_strides[{t.ndim}]")
                writes += [(f"{name}_strides[{i}]", "int64_t") for i in range(t.ndim)]
        elif isinstance(t, kt.TensorMapType):
            decls.append(f"const kaiojit_tensormap *{name}")
            writes.append((f"*{name}", "kaiojit_tensormap"))
        elif isinstance(t, kt.ScalarType) and t.is_complex:
            part = _scalar_c(t.component)
            decls += [f"{part} {name}_re", f"{part} {name}_im"]
            writes += [(f"{name}_re", part), (f"{name}_im", part)]
        elif isinstance(t, kt.ScalarType):
            c = _scalar_c(t)
            decls.append(f"{c} {name}")
            writes.append((name, c))
        else:
            raise ValueError(f"parameter {name!r}: {t} cannot be exported")
    return decls, writes


def record_tag(t: kt.RecordType) -> str:
    """``rec<hash>``: a short name for a record layout, the same in every export."""
    return "rec" + hashlib.sha1(str(t).encode()).hexdigest()[:8]


def record_struct(t: kt.RecordType) -> str:
    return f"kaiojit_{record_tag(t)}"


def _record_definition(t: kt.RecordType) -> list[str]:
    """The C struct of record ``t``: its fields at NumPy's offsets with explicit padding
    between, packed (``#pragma pack(1)``) when the dtype is, and compile-time checks of its
    size and every offset (a C99 array of negative size where one differs)."""
    name = record_struct(t)
    body, at, pads = [], 0, 0
    for field, ft, offset in t.fields:
        if not field.isidentifier() or not field.isascii():
            raise ValueError(f"record field {field!r} is not a C identifier; rename it to "
                             "export the kernel")
        if offset > at:
            body.append(f"    unsigned char _pad{pads}[{offset - at}];")
            pads += 1
        if ft.is_complex:
            body.append(f"    {_scalar_c(ft.component)} {field}[2];  /* {ft}: real, imag */")
        else:
            body.append(f"    {_scalar_c(ft)} {field};  /* {ft} */")
        at = offset + ft.itemsize
    if t.itemsize > at:
        body.append(f"    unsigned char _pad{pads}[{t.itemsize - at}];")
    packed = not t.aligned
    lines = [f"/* {t} */"]
    lines += ["#pragma pack(push, 1)"] if packed else []
    lines += [f"typedef struct {name} {{", *body, f"}} {name};"]
    lines += ["#pragma pack(pop)"] if packed else []
    lines.append(f"typedef char {name}_size_is_{t.itemsize}"
                 f"[sizeof({name}) == {t.itemsize} ? 1 : -1];")
    for field, _, offset in t.fields:
        lines.append(f"typedef char {name}_{field}_at_{offset}"
                     f"[offsetof({name}, {field}) == {offset} ? 1 : -1];")
    return lines + [""]


def _records(manifest: Manifest) -> list[kt.RecordType]:
    seen: list[kt.RecordType] = []
    for e in manifest.entries:
        for t in kt.parse_signature(e.signature).args:
            if isinstance(t, kt.ArrayType) and isinstance(t.dtype, kt.RecordType) \
                    and t.dtype not in seen:
                seen.append(t.dtype)
    return seen


def _prototype(entry: Entry) -> str:
    decls, _ = c_parameters(entry)
    params = ",\n    ".join(["const kaiojit_launch_config *config", *decls])
    return f"int {entry.c_name}(\n    {params})"


def header_text(manifest: Manifest) -> str:
    lines = [
        f"/* Generated by kaiojit {manifest.kaiojit_version} for target {manifest.target}: one "
        "launch function per exported signature.",
        " * Returns 0, or a CUresult (GPU) / kaiojit's code of the same number (host). */",
        "#ifndef KAIOJIT_KERNELS_H", "#define KAIOJIT_KERNELS_H", "",
        "#include <stdbool.h>", "#include <stddef.h>", "#include <stdint.h>", "",
        "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
        "typedef struct kaiojit_launch_config {",
        "    unsigned grid[3];          /* blocks in x, y, z (0 counts as 1) */",
        "    unsigned block[3];         /* threads a block in x, y, z (0 counts as 1) */",
        "    size_t shared_bytes;       /* dynamic shared memory */",
        "    void *stream;              /* a CUstream, or NULL (ignored on the host) */",
        "    unsigned cluster[3];       /* a thread-block cluster, or zeros */",
        "} kaiojit_launch_config;", "",
        "typedef struct kaiojit_tensormap { uint64_t opaque[16]; } kaiojit_tensormap;", "",
        "enum {",
        "    KAIOJIT_SUCCESS = 0,",
        "    KAIOJIT_ERROR_INVALID_VALUE = 1,      /* a bad configuration */",
        "    KAIOJIT_ERROR_OUT_OF_MEMORY = 2,",
        "    KAIOJIT_ERROR_NO_BINARY = 209,        /* no cubin or PTX for this device */",
        "    KAIOJIT_ERROR_LAUNCH_FAILED = 719     /* the kernel faulted (message on stderr) */",
        "};", "",
        f'#define KAIOJIT_TARGET "{manifest.target}"', "",
    ]
    for record in _records(manifest):
        lines += _record_definition(record)
    for e in manifest.entries:
        lines.append(f"/* {e.kernel}: {e.signature}{_config_note(manifest, e)} */")
        lines.append(_prototype(e) + ";")
        lines.append("")
    lines += ["#ifdef __cplusplus", "}", "#endif", "", "#endif", ""]
    return "\n".join(lines)


def _config_note(manifest: Manifest, entry: Entry) -> str:
    """For a config of an autotuned kernel: which, how to launch it, and the keys the tuner
    chose it for."""
    if not entry.autotune:
        return ""
    record = manifest.autotuned[entry.kernel]
    index = entry.autotune["index"]
    config = record["configs"][index]
    keys = [", ".join(f"{n}={v}" for n, v in zip(record["key"], c["key"]))
            for c in record["choices"]
            if c["index"] == index and c["signature"] == entry.autotune["call_signature"]]
    passed = [f"{n} = {v}" for n, v in config["constants"].items() if n in entry.arg_names]
    note = (f"\n * autotuned: config {index} of {len(record['configs'])}, {config['text']}"
            f"\n * launch with block {config['block']} and {config['shared']} bytes of dynamic "
            "shared memory" + (f", passing {', '.join(passed)}" if passed else ""))
    if keys:
        note += f"\n * the tuner chose it for {'; '.join(k or 'its key' for k in keys)}"
    return note


def _alignment_checks(entry: Entry) -> list[str]:
    """An ``align=16`` array's data and row strides tested first: a kernel compiled for
    aligned rows would fault on others, so the launch returns 1 (``CUDA_ERROR_INVALID_VALUE``
    on the GPU) as the Python loader refuses them."""
    out = []
    for t, name in zip(kt.parse_signature(entry.signature).args, entry.arg_names):
        if isinstance(t, kt.ArrayType) and t.align:
            terms = [f"(uintptr_t){name} % {t.align}"]
            if t.passes_strides:
                terms += [f"{name}_strides[{i}] % {t.align}" for i in range(t.ndim - 1)]
            out.append(f"    if ({' || '.join(terms)}) return 1; /* {name}: align={t.align} */")
    return out


def _pack(entry: Entry, trailing: bool = False) -> list[str]:
    """C statements that fill ``slots`` and ``params`` for ``entry``; ``trailing``: room for
    one more parameter after them (a coarse entry's grid extent, :func:`_trailing_slot`)."""
    _, writes = c_parameters(entry)
    out = [*_alignment_checks(entry), f"    uint64_t raw[{entry.slot_count + 1 + 8}];",
           "    uint64_t *slots = (uint64_t *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);",
           f"    void *params[{max(len(writes) + int(trailing), 1)}];",
           f"    memset(slots, 0, {entry.slot_count} * sizeof(uint64_t));"]
    for i, ((expr, ctype), slot) in enumerate(zip(writes, entry.first_slot)):
        out.append(f"    {{ {ctype} v = {expr}; memcpy(&slots[{slot}], &v, sizeof v); }}")
        out.append(f"    params[{i}] = &slots[{slot}];")
    out.append("    (void)params;")
    return out


def _bytes_array(name: str, data: bytes) -> str:
    rows = []
    for i in range(0, len(data), 24):
        rows.append("    " + ",".join(str(b) for b in data[i:i + 24]) + ",")
    return f"static const unsigned char {name}[] = {{\n" + "\n".join(rows) + "\n    0};"


def _arch_cc(arch: str) -> tuple[int, int]:
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    return int(digits), 1 if arch.endswith("a") else 0


def _trailing_slot(entry: Entry) -> int:
    """The slot of a coarse entry's last parameter, the user's ``grid.x`` (an int64 after the
    kernel's own parameters, as ``kaiojit.runtime.args.ArgPacker(trailing=True)`` packs it)."""
    return SlotLayout.for_kinds([*entry.param_kinds, "int64"]).first_slot[-1]


def _images(out: list[str], directory: str, archs: list[str], name: str,
            files: dict[str, dict[str, str]]) -> int:
    """Embed the cubin and the PTX of each arch as ``kj_image`` rows of ``kj_images_<name>``;
    how many rows."""
    images = []
    for arch in archs:
        cc, specific = _arch_cc(arch)
        for kind in ("cubin", "ptx"):
            with open(os.path.join(directory, files[kind][arch]), "rb") as f:
                data = f.read()
            array = f"kj_{kind}_{name}_{arch}"
            out.append(_bytes_array(array, data))
            size = len(data) if kind == "cubin" else len(data) + 1  # PTX: with its NUL
            images.append(f"{{{cc}, {specific}, {int(kind == 'ptx')}, {array}, {size}}}")
    out.append(f"static const kj_image kj_images_{name}[] = {{{', '.join(images)}}};")
    return len(images)


def _coarse_launch(entry: Entry, k: int, n: int, params: int) -> list[str]:
    """A coarse entry's launch by the JIT's rule (``ModuleKernel.entry``): at least
    ``kj_coarse_min_threads()`` threads in x, no cluster or dynamic shared memory, a block its
    registers allow; ``ceil(grid.x / 4)`` blocks, told ``grid.x``. Else the own entry's."""
    return [
        "    {",
        "        unsigned gx = kj_dim(config->grid[0]);",
        "        unsigned long long threads = (unsigned long long)kj_dim(config->block[0])",
        "            * kj_dim(config->block[1]) * kj_dim(config->block[2]);",
        "        if (gx * threads >= kj_coarse_min_threads() && !config->shared_bytes",
        "            && !(config->cluster[0] || config->cluster[1] || config->cluster[2])",
        f"            && kj_coarse_function(&kj_loaded_{k}c, kj_images_{k}c, {n}, "
        f'"{entry.coarse_symbol}") == CUDA_SUCCESS',
        f"            && threads <= (unsigned long long)kj_loaded_{k}c.max_threads) {{",
        "            kaiojit_launch_config coarse = *config;",
        "            int64_t extent = gx;",
        f"            coarse.grid[0] = (gx + {H.COARSE_FACTOR - 1}) / {H.COARSE_FACTOR};",
        f"            memcpy(&slots[{_trailing_slot(entry)}], &extent, sizeof extent);",
        f"            params[{params}] = &slots[{_trailing_slot(entry)}];",
        f"            return (int)kj_launch(kj_loaded_{k}c.fn, &coarse, params, "
        f"{int(entry.cooperative)});",
        "        }",
        "    }",
    ]


def cuda_source(manifest: Manifest, directory: str) -> str:
    out = [f"/* Generated by kaiojit {manifest.kaiojit_version}: GPU launchers on the CUDA "
           "driver API. Build: cc -c kaiojit_kernels.c; link -lcuda. */",
           f'#include "{HEADER}"', "#include <cuda.h>", "#include <stdlib.h>",
           "#include <string.h>", "",
           "typedef struct { int cc; int specific; int is_ptx; const unsigned char *data; "
           "size_t size; } kj_image;",
           "typedef struct { CUcontext ctx; CUmodule module; CUfunction fn; int max_threads; "
           "int failed; } kj_loaded;", "",
           _CUDA_HELPERS.replace("@COARSE_KNOB@", _COARSE_KNOB.name)
           .replace("@COARSE_MIN_THREADS@", str(_COARSE_KNOB.default))]
    for k, e in enumerate(manifest.entries):
        n = _images(out, directory, manifest.archs, str(k), {"cubin": e.cubins, "ptx": e.ptx})
        out.append(f"static kj_loaded kj_loaded_{k};")
        coarse = bool(e.coarse_symbol)
        if coarse:
            nc = _images(out, directory, manifest.archs, f"{k}c",
                         {"cubin": e.coarse_cubins, "ptx": e.coarse_ptx})
            out.append(f"static kj_loaded kj_loaded_{k}c;")
        out.append("")
        out.append(_prototype(e))
        out.append("{")
        out += _pack(e, trailing=coarse)
        out.append(f"    CUresult rc = kj_function(&kj_loaded_{k}, kj_images_{k}, "
                   f"{n}, \"{e.symbol}\");")
        out.append("    if (rc != CUDA_SUCCESS) return (int)rc;")
        if coarse:
            out += _coarse_launch(e, k, nc, len(c_parameters(e)[1]))
        out.append(f"    return (int)kj_launch(kj_loaded_{k}.fn, config, params, "
                   f"{int(e.cooperative)});")
        out.append("}")
        out.append("")
    return "\n".join(out)


_CUDA_HELPERS = r"""
/* The image for the current device: its own cubin (an arch-specific one only on exactly its
   compute capability, another of the same major and a lower minor otherwise), else the PTX
   of the highest arch it can JIT. */
static CUresult kj_function(kj_loaded *slot, const kj_image *images, int n, const char *name)
{
    CUcontext ctx;
    CUdevice dev;
    int major, minor, cc, i, best = -1, best_cc = -1;
    CUresult rc = cuCtxGetCurrent(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (ctx == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    if (slot->fn != NULL && slot->ctx == ctx) return CUDA_SUCCESS;
    if ((rc = cuCtxGetDevice(&dev)) != CUDA_SUCCESS) return rc;
    if ((rc = cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)))
        return rc;
    if ((rc = cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)))
        return rc;
    cc = major * 10 + minor;
    for (i = 0; i < n; i++) {  /* cubins first */
        const kj_image *im = &images[i];
        if (im->is_ptx || im->cc / 10 != major || im->cc > cc) continue;
        if (im->specific && im->cc != cc) continue;
        if (im->cc > best_cc) { best = i; best_cc = im->cc; }
    }
    if (best < 0) {
        for (i = 0; i < n; i++) {  /* then the PTX, which the driver compiles */
            const kj_image *im = &images[i];
            if (!im->is_ptx || im->specific || im->cc > cc) continue;
            if (im->cc > best_cc) { best = i; best_cc = im->cc; }
        }
    }
    if (best < 0) return CUDA_ERROR_NO_BINARY_FOR_GPU;
    rc = cuModuleLoadData(&slot->module, images[best].data);
    if (rc != CUDA_SUCCESS) return rc;
    rc = cuModuleGetFunction(&slot->fn, slot->module, name);
    if (rc == CUDA_SUCCESS)
        rc = cuFuncGetAttribute(&slot->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                slot->fn);
    if (rc != CUDA_SUCCESS) { cuModuleUnload(slot->module); slot->fn = NULL; return rc; }
    slot->ctx = ctx;
    return CUDA_SUCCESS;
}

/* A coarse entry, tried once per context (a failure leaves the kernel's own, as in Python). */
static CUresult kj_coarse_function(kj_loaded *slot, const kj_image *images, int n,
                                   const char *name)
{
    CUcontext ctx;
    CUresult rc = cuCtxGetCurrent(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (slot->failed && slot->ctx == ctx) return CUDA_ERROR_NOT_FOUND;
    rc = kj_function(slot, images, n, name);
    slot->failed = rc != CUDA_SUCCESS;
    if (slot->failed) slot->ctx = ctx;
    return rc;
}

/* The smallest launch (grid.x times the block's threads) that takes a coarse entry:
   KAIOJIT_COARSE_MIN_THREADS where set to a whole number, as for the JIT, read once. */
static unsigned long long kj_coarse_min_threads(void)
{
    static unsigned long long value;
    static int read;
    if (!read) {
        const char *s = getenv("@COARSE_KNOB@");
        char *end = NULL;
        unsigned long long v = s && *s ? strtoull(s, &end, 10) : 0;
        value = s && *s && end && !*end ? v : @COARSE_MIN_THREADS@ULL;
        read = 1;
    }
    return value;
}

static unsigned kj_dim(unsigned d) { return d ? d : 1; }

static CUresult kj_launch(CUfunction fn, const kaiojit_launch_config *c, void **params,
                          int cooperative)
{
    CUlaunchConfig config;
    CUlaunchAttribute attrs[2];
    unsigned n = 0;
    CUresult rc;
    if (c->shared_bytes > 48 * 1024) {
        rc = cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                (int)c->shared_bytes);
        if (rc != CUDA_SUCCESS) return rc;
    }
    memset(&config, 0, sizeof config);
    config.gridDimX = kj_dim(c->grid[0]);
    config.gridDimY = kj_dim(c->grid[1]);
    config.gridDimZ = kj_dim(c->grid[2]);
    config.blockDimX = kj_dim(c->block[0]);
    config.blockDimY = kj_dim(c->block[1]);
    config.blockDimZ = kj_dim(c->block[2]);
    config.sharedMemBytes = (unsigned)c->shared_bytes;
    config.hStream = (CUstream)c->stream;
    if (c->cluster[0] || c->cluster[1] || c->cluster[2]) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[n].value.clusterDim.x = kj_dim(c->cluster[0]);
        attrs[n].value.clusterDim.y = kj_dim(c->cluster[1]);
        attrs[n].value.clusterDim.z = kj_dim(c->cluster[2]);
        n++;
    }
    if (cooperative) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[n].value.cooperative = 1;
        n++;
    }
    config.attrs = attrs;
    config.numAttrs = n;
    return cuLaunchKernelEx(&config, fn, params, NULL);
}
"""


def host_source(manifest: Manifest) -> str:
    out = [f"/* Generated by kaiojit {manifest.kaiojit_version}: host launchers of the exported "
           "kernels. Build: cc -c kaiojit_kernels.c; link -lkaiojit_kernels -lpthread. */",
           f'#include "{HEADER}"', "#include <pthread.h>", "#include <stdio.h>",
           "#include <stdlib.h>", "#include <string.h>", "",
           _HOST_HELPERS.replace("@CTX_WORDS@", str(H.CTX_WORDS))
           .replace("@LAUNCH_WORDS@", str(H.LAUNCH_WORDS))]
    for k, e in enumerate(manifest.entries):
        out.append(f"KJ_EXTERN_C void {e.symbol}(void *slots, int64_t *ctx, int64_t first, "
                   "int64_t end);")
        sites = ", ".join('"%s"' % _c_string(_site_text(s)) for s in e.sites) or '""'
        out.append(f"static const char *const kj_sites_{k}[] = {{{sites}}};")
        out.append("")
        out.append(_prototype(e))
        out.append("{")
        out += _pack(e)
        out.append(f"    kj_kernel kernel = {{\"{e.kernel}\", {e.symbol}, "
                   f"{e.static_shared_bytes}, {int(e.uses_block_mode)}, {int(e.cooperative)}, "
                   f"kj_sites_{k}, {max(len(e.sites), 1)}}};")
        out.append("    return kj_run(&kernel, config, slots);")
        out.append("}")
        out.append("")
    return "\n".join(out)


def _site_text(site: dict) -> str:
    where = f"{site.get('filename', '?')}:{site.get('line', '?')}"
    return f"{site.get('kind', 'fault')} at {where}"


def _c_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


_HOST_HELPERS = f"""
#ifdef __cplusplus
#define KJ_EXTERN_C extern "C"  /* the library's entries have C names, built as C++ too */
#else
#define KJ_EXTERN_C
#endif
typedef void (*kj_entry)(void *slots, int64_t *ctx, int64_t first, int64_t end);
typedef struct {{ const char *name; kj_entry run; int64_t static_shared; int block_mode;
                 int cooperative; const char *const *sites; int nsites; }} kj_kernel;
typedef struct {{ kj_entry run; void *slots; int64_t ctx[@CTX_WORDS@]; int64_t first, end;
                 unsigned char *shared; int64_t cluster[{H.CLUSTER_WORDS}]; }} kj_worker;

#define KJ_PRINT_BYTES (1 << 20)
#define KJ_STACK_BYTES ((size_t)512 << 20)  /* block mode keeps every thread's variables */

static void *kj_work(void *arg)
{{
    kj_worker *w = (kj_worker *)arg;
    w->run(w->slots, w->ctx, w->first, w->end);
    return NULL;
}}

static unsigned kj_dim(unsigned d) {{ return d ? d : 1; }}

static int kj_run(const kj_kernel *k, const kaiojit_launch_config *c, void *slots)
{{
    int64_t launch[@LAUNCH_WORDS@];
    int64_t grid[3], block[3], nblocks, threads, i, nworkers;
    size_t shared_bytes = (size_t)k->static_shared + c->shared_bytes;
    kj_worker *workers;
    char *prints;
    int rc = KAIOJIT_SUCCESS;
    for (i = 0; i < 3; i++) {{ grid[i] = kj_dim(c->grid[i]); block[i] = kj_dim(c->block[i]); }}
    nblocks = grid[0] * grid[1] * grid[2];
    threads = block[0] * block[1] * block[2];
    if (threads > 1024 || block[2] > 64 || grid[1] > 65535 || grid[2] > 65535
            || grid[0] > 2147483647LL || c->shared_bytes > 227 * 1024)
        return KAIOJIT_ERROR_INVALID_VALUE;
    nworkers = k->cooperative ? nblocks : 1;
    workers = (kj_worker *)calloc((size_t)nworkers, sizeof(kj_worker));
    prints = (char *)malloc(KJ_PRINT_BYTES);
    if (workers == NULL || prints == NULL) {{
        free(workers);
        free(prints);
        return KAIOJIT_ERROR_OUT_OF_MEMORY;
    }}
    memset(launch, 0, sizeof launch);
    launch[{H.LAUNCH_PRINT_CAP}] = KJ_PRINT_BYTES;
    launch[{H.LAUNCH_PRINT_BUF}] = (int64_t)(intptr_t)prints;
    for (i = 0; i < nworkers; i++) {{
        kj_worker *w = &workers[i];
        w->run = k->run;
        w->slots = slots;
        w->first = k->cooperative ? i : 0;
        w->end = k->cooperative ? i + 1 : nblocks;
        w->shared = (unsigned char *)calloc(1, shared_bytes + {1024});
        if (w->shared == NULL) {{ rc = KAIOJIT_ERROR_OUT_OF_MEMORY; break; }}
        memcpy(&w->ctx[{H.CTX_GRID}], grid, sizeof grid);
        memcpy(&w->ctx[{H.CTX_BLOCK}], block, sizeof block);
        w->ctx[{H.CTX_SHARED}] = ((int64_t)(intptr_t)w->shared + 1023) & ~(int64_t)1023;
        w->ctx[{H.CTX_DYN_BYTES}] = (int64_t)c->shared_bytes;
        w->ctx[{H.CTX_LAUNCH}] = (int64_t)(intptr_t)launch;
        /* the host runs every block as a cluster of one */
        w->ctx[{H.CTX_CLUSTER_DIM}] = w->ctx[{H.CTX_CLUSTER_DIM + 1}] = 1;
        w->ctx[{H.CTX_CLUSTER_DIM + 2}] = 1;
        w->cluster[{H.CLUSTER_SHARED}] = w->ctx[{H.CTX_SHARED}];
        w->ctx[{H.CTX_CLUSTER_STATE}] = (int64_t)(intptr_t)w->cluster;
    }}
    if (rc == KAIOJIT_SUCCESS) {{
        pthread_t *tids = (pthread_t *)calloc((size_t)nworkers, sizeof(pthread_t));
        pthread_attr_t attr;
        int64_t started = 0;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, k->block_mode ? KJ_STACK_BYTES : ((size_t)8 << 20));
        for (i = 0; tids != NULL && i < nworkers; i++, started++)
            if (pthread_create(&tids[i], &attr, kj_work, &workers[i]) != 0) break;
        for (i = 0; i < started; i++) pthread_join(tids[i], NULL);
        pthread_attr_destroy(&attr);
        if (tids == NULL || started < nworkers) rc = KAIOJIT_ERROR_OUT_OF_MEMORY;
        free(tids);
    }}
    if (launch[{H.LAUNCH_PRINT_USED}] > 0) {{
        int64_t used = launch[{H.LAUNCH_PRINT_USED}];
        fwrite(prints, 1, (size_t)(used < KJ_PRINT_BYTES ? used : KJ_PRINT_BYTES), stdout);
        fflush(stdout);
    }}
    if (rc == KAIOJIT_SUCCESS && launch[{H.LAUNCH_ERROR}]) {{
        int64_t site = launch[{H.LAUNCH_SITE}];
        fprintf(stderr, "kaiojit: kernel %s faulted: %s (index %lld, extent %lld, block %lld, "
                "thread %lld)\\n", k->name,
                site >= 0 && site < k->nsites ? k->sites[site] : "a fault",
                (long long)launch[{H.LAUNCH_INDEX}], (long long)launch[{H.LAUNCH_EXTENT}],
                (long long)launch[{H.LAUNCH_BLOCK}], (long long)launch[{H.LAUNCH_THREAD}]);
        rc = KAIOJIT_ERROR_LAUNCH_FAILED;
    }}
    for (i = 0; i < nworkers; i++) free(workers[i].shared);
    free(workers);
    free(prints);
    return rc;
}}
"""


def write_c_launcher(directory: str, manifest: Manifest) -> tuple[str, str]:
    """Write the header and the source for ``manifest``'s target into ``directory``."""
    header = os.path.join(directory, HEADER)
    source = os.path.join(directory, SOURCE)
    with open(header, "w") as f:
        f.write(header_text(manifest))
    text = cuda_source(manifest, directory) if manifest.target == "nvptx" else \
        host_source(manifest)
    with open(source, "w") as f:
        f.write(text)
    return header, source


def cuda_include_dir() -> str | None:
    """The directory holding ``cuda.h`` that the CUDA launcher compiles against: ``CUDA_HOME``
    or ``CUDA_PATH``, ``/usr/local/cuda``, or an nvidia-* wheel's headers; None if none has it."""
    import glob
    import sys

    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [os.path.join(r, "include") for r in roots if r]
    for base in sys.path:
        candidates += sorted(glob.glob(os.path.join(base, "nvidia", "cu*", "include")))
        candidates.append(os.path.join(base, "nvidia", "cuda_runtime", "include"))
    return next((c for c in candidates if os.path.exists(os.path.join(c, "cuda.h"))), None)
