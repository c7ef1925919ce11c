"""Hand-written PTX and images for the runtime tests (no compiler needed)."""

from __future__ import annotations

from dataclasses import dataclass

from kaiojit import types as kt

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


@dataclass(frozen=True)
class Image:
    """What the compiler would hand the runtime."""

    name: str
    ptx: str
    signature: kt.Signature
    arg_names: tuple[str, ...]
    static_shared_bytes: int = 0


def image(name: str, ptx: str, sig: str, names: str) -> Image:
    return Image(name, ptx, kt.parse_signature(sig), tuple(names.split()))


# (kaiojit scalar, PTX param type, PTX load type, register) in kernel parameter order.
SCALAR_PARAMS = [
    ("bool", ".u8", "u8", "%h"), ("int8", ".s8", "s8", "%h"), ("int16", ".s16", "s16", "%h"),
    ("int32", ".s32", "s32", "%r"), ("int64", ".s64", "s64", "%rd"), ("uint8", ".u8", "u8", "%h"),
    ("uint16", ".u16", "u16", "%h"), ("uint32", ".u32", "u32", "%r"),
    ("uint64", ".u64", "u64", "%rd"), ("float16", ".b16", "b16", "%h"),
    ("float32", ".f32", "f32", "%f"), ("float64", ".f64", "f64", "%fd"),
]
_STORE = {"u8": "u8", "s8": "u8", "s16": "u16", "u16": "u16", "b16": "b16", "s32": "u32",
          "u32": "u32", "s64": "u64", "u64": "u64", "f32": "f32", "f64": "f64"}


def scalars_ptx() -> str:
    """``scalars(out, p0, ..., p11)``: stores each scalar's bytes at ``out + 8*k``."""
    # `out` is a uint64[::1] argument: a pointer, then its length.
    params = ",\n".join([".param .u64 out", ".param .s64 out_n"] + [
        f".param {pt} p{k}" for k, (_, pt, _, _) in enumerate(SCALAR_PARAMS)])
    body = ["ld.param.u64 %rd0, [out];", "cvta.to.global.u64 %rd0, %rd0;"]
    for k, (_, _, ld, reg) in enumerate(SCALAR_PARAMS):
        r = f"{reg}{k + 1}"
        body.append(f"ld.param.{ld} {r}, [p{k}];")
        body.append(f"st.global.{_STORE[ld]} [%rd0+{8 * k}], {r};")
    regs = (".reg .b16 %h<16>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n.reg .f32 %f<16>;\n"
            ".reg .f64 %fd<16>;")
    return f"{HEADER}.visible .entry scalars(\n{params}\n)\n{{\n{regs}\n" + \
        "\n".join(body) + "\nret;\n}\n"


def scalars_image() -> Image:
    sig = "void(uint64[::1], " + ", ".join(s for s, *_ in SCALAR_PARAMS) + ")"
    names = "out " + " ".join(f"p{k}" for k in range(len(SCALAR_PARAMS)))
    return image("scalars", scalars_ptx(), sig, names)


# tmap(out: u64*, tm: CUtensorMap, after: u32): copies tm's 128 bytes and `after` to out.
TENSORMAP_PTX = HEADER + """.visible .entry tmap(
.param .u64 out,
.param .align 64 .b8 tm[128],
.param .u32 after
)
{
.reg .b32 %r<2>;
.reg .b64 %rd<20>;
ld.param.u64 %rd0, [out];
cvta.to.global.u64 %rd0, %rd0;
""" + "".join(f"ld.param.u64 %rd{k + 1}, [tm+{8 * k}];\nst.global.u64 [%rd0+{8 * k}], %rd{k + 1};\n"
              for k in range(16)) + """ld.param.u32 %r1, [after];
st.global.u32 [%rd0+128], %r1;
ret;
}
"""

# axpy(out: float32[::1], x: float32[:], a: float32, n: int64): out[i] = a * x[i], x strided.
AXPY_PTX = HEADER + """.visible .entry axpy(
.param .u64 out, .param .s64 out_n,
.param .u64 x, .param .s64 x_n, .param .s64 x_s,
.param .f32 a, .param .s64 n
)
{
.reg .pred %p;
.reg .b32 %r<5>;
.reg .b64 %rd<10>;
.reg .f32 %f<4>;
mov.u32 %r1, %ctaid.x;
mov.u32 %r2, %ntid.x;
mov.u32 %r3, %tid.x;
mad.lo.s32 %r4, %r1, %r2, %r3;
cvt.s64.s32 %rd1, %r4;
ld.param.s64 %rd2, [n];
setp.ge.s64 %p, %rd1, %rd2;
@%p bra DONE;
ld.param.u64 %rd3, [x];
cvta.to.global.u64 %rd3, %rd3;
ld.param.s64 %rd4, [x_s];
mad.lo.s64 %rd5, %rd1, %rd4, %rd3;
ld.global.f32 %f1, [%rd5];
ld.param.f32 %f2, [a];
mul.f32 %f3, %f1, %f2;
ld.param.u64 %rd6, [out];
cvta.to.global.u64 %rd6, %rd6;
shl.b64 %rd7, %rd1, 2;
add.s64 %rd8, %rd6, %rd7;
st.global.f32 [%rd8], %f3;
DONE:
ret;
}
"""


def axpy_image() -> Image:
    return image("axpy", AXPY_PTX, "void(float32[::1], float32[:], float32, int64)",
                 "out x a n")


# store_to(p: int64): writes to address p; p = 16 faults with an illegal address.
FAULT_PTX = HEADER + """.visible .entry store_to(.param .u64 p)
{
.reg .b32 %r<2>;
.reg .b64 %rd<2>;
ld.param.u64 %rd1, [p];
mov.u32 %r1, 7;
st.global.u32 [%rd1], %r1;
ret;
}
"""

BAD_PTX = HEADER + """.visible .entry broken(.param .u64 p)
{
.reg .b64 %rd<2>;
ld.param.u64 %rd1, [p];
frobnicate.u64 %rd1, %rd1;
ret;
}
"""

# The same kernel as the compiler would declare it for "void(uint8[::1], tensormap, uint32)":
# the array argument brings its length as a second parameter.
TENSORMAP_ARRAY_PTX = TENSORMAP_PTX.replace(".param .u64 out,", ".param .u64 out,\n.param .s64 out_n,")
