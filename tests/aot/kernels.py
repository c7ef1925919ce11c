"""Kernels the export tests compile: every argument kind a signature can have."""

import kaiojit as kj


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@kj.jit
def scalars(out, b, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, c64, e4m3, e5m2):
    """Each scalar written back as float64 bits of its value (complex: the real part, then
    the imaginary one)."""
    if kj.grid(1) == 0:
        out[0] = kj.float64(b)
        out[1] = kj.float64(i8)
        out[2] = kj.float64(i16)
        out[3] = kj.float64(i32)
        out[4] = kj.float64(i64)
        out[5] = kj.float64(u8)
        out[6] = kj.float64(u16)
        out[7] = kj.float64(u32)
        out[8] = kj.float64(u64)
        out[9] = kj.float64(f16)
        out[10] = kj.float64(bf16)
        out[11] = kj.float64(f32)
        out[12] = f64
        out[13] = kj.float64(c64.real)
        out[14] = kj.float64(c64.imag)
        out[15] = kj.float64(e4m3)
        out[16] = kj.float64(e5m2)


@kj.jit
def ranks(out, a1, a2, a3, f2):
    """out[i] = sums over arrays of rank 1 to 3, one of them strided ('A'), one 'F'."""
    i = kj.grid(1)
    if i < a1.shape[0]:
        s = a1[i]
        for j in range(a2.shape[1]):
            s += a2[i, j]
        for j in range(a3.shape[1]):
            for k in range(a3.shape[2]):
                s += a3[i, j, k]
        for j in range(f2.shape[1]):
            s += f2[i, j]
        out[i] = s


@kj.jit
def block_sum(x, out):
    """A shared-memory tree sum per block, with dynamic shared memory."""
    buf = kj.shared.array(0, kj.float32)
    t = kj.threadIdx.x
    i = kj.grid(1)
    buf[t] = x[i] if i < x.shape[0] else kj.float32(0)
    kj.syncthreads()
    step = kj.blockDim.x // 2
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        kj.syncthreads()
        step //= 2
    if t == 0:
        out[kj.blockIdx.x] = buf[0]


@kj.jit(debug=True)
def oob(out, n):
    """Writes past the end of ``out`` when ``n`` > 0: a bounds fault under debug=True."""
    i = kj.grid(1)
    out[i + n] = 1.0


@kj.jit
def tile_copy(src, dst, scale, tag):
    """A tensor map among other kinds of parameter (exported for the GPU only)."""
    tile = kj.shared.array((32, 32), kj.float32)
    bar = kj.shared.array(1, kj.uint64)
    if kj.threadIdx.x == 0:
        kj.mbarrier.init(bar, 1)
    kj.syncthreads()
    if kj.threadIdx.x == 0:
        kj.mbarrier.arrive_expect_tx(bar, 32 * 32 * 4)
        kj.tma.load(tile, src, 0, 0, bar)
    kj.mbarrier.wait(bar, 0)
    i = kj.threadIdx.x
    dst[0, i] = kj.float64(tile[0, i]) * scale.real + kj.float64(tag)


@kj.jit
def record_sum(a, out):
    """Reads every field of a record (a NumPy structured dtype) and writes two of them back."""
    i = kj.grid(1)
    if i < a.size:
        r = a[i]
        out[i] = r.x * 2 + r.y + r.n + (1.0 if r.b else 0.0) + r.z.imag + r.u
        r.x = kj.float32(r.y)
        r.n += 3
