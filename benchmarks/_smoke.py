import time, math, numpy as np, kaiojit as kj
print("backend", kj.backend())
@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]
n = 1 << 20
rng = np.random.default_rng()
x = rng.standard_normal(n, dtype=np.float32); y = rng.standard_normal(n, dtype=np.float32)
dx, dy = kj.to_device(x), kj.to_device(y); dout = kj.to_device(np.full(n, np.nan, np.float32))
saxpy[(n+255)//256, 256](dout, dx, dy, np.float32(1.5), np.int32(n))
print("saxpy ok", np.allclose(dout.copy_to_host(), 1.5*x+y, rtol=1e-6, atol=1e-6))

@kj.jit
def bsum(out, x):
    sm = kj.shared.array(128, kj.float32)
    tid = kj.threadIdx.x
    i = kj.grid(1)
    sm[tid] = x[i] if i < x.size else 0.0
    kj.syncthreads()
    s = kj.blockDim.x // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
        kj.syncthreads()
        s //= 2
    if tid == 0:
        kj.atomic.add(out, 0, sm[0])
o = kj.to_device(np.zeros(1, np.float32))
bsum[(n+127)//128, 128](o, dx)
print("bsum", o.copy_to_host()[0], x.sum(dtype=np.float64))

@kj.jit
def mathk(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = math.exp(x[i]) + math.sin(x[i])
mathk[(n+255)//256, 256](dout, dx)
print("math ok", np.allclose(dout.copy_to_host(), np.exp(x)+np.sin(x), rtol=1e-5, atol=1e-5))
import torch
tx = torch.from_numpy(x).cuda(); ty = torch.from_numpy(y).cuda(); to = torch.empty_like(tx)
saxpy[(n+255)//256, 256](to, tx, ty, np.float32(1.5), np.int32(n))
torch.cuda.synchronize()
print("torch ok", torch.allclose(to, 1.5*tx+ty))
l = saxpy[1, 32]
small = kj.device_array(32, np.float32)
a, m = np.float32(1.0), np.int32(32)
for rep in range(3):
    kj.synchronize(); t = time.perf_counter()
    for _ in range(20000): l(small, small, small, a, m)
    kj.synchronize(); print("launch us", (time.perf_counter()-t)/20000*1e6)
