"""Where a launch's host time goes (a development aid, not a figure to record)."""
import cProfile, pstats, time
import numpy as np
import kaiojit as kj

@kj.jit
def tiny(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]

d = kj.device_array(32, np.float32)
a, n = np.float32(1.0), np.int32(32)
lau = tiny[1, 32]
lau(d, d, d, a, n)
kj.synchronize()
loaded = tiny._launch_cache[next(iter(tiny._launch_cache))]
backend = loaded.backend
dk = loaded.on_device(0)
slots = loaded._slots.get()
loaded.packer.pack(slots, (d, d, d, a, n), 0)

def per_launch(f, reps=20000):
    best = 1e9
    for _ in range(3):
        kj.synchronize(); t = time.perf_counter()
        for _ in range(reps):
            f()
        kj.synchronize(); best = min(best, (time.perf_counter() - t) / reps * 1e6)
    return best

print("raw ctypes launch  %.2f us" % per_launch(lambda: backend._launch(dk.fn.handle, 1, 1, 1, 32, 1, 1, 0, 0, slots.params_address, None)))
print("backend.launch_typed %.2f us" % per_launch(lambda: backend.launch_typed(dk.fn, (1, 1, 1), (32, 1, 1), 0, 0, slots)))
print("loaded.launch      %.2f us" % per_launch(lambda: loaded.launch(1, 32, None, 0, (d, d, d, a, n))))
print("kernel[1,32](...)  %.2f us" % per_launch(lambda: lau(d, d, d, a, n)))
from cuda.bindings import driver as drv
import ctypes
fnobj = dk.fn.obj
print("cuda-python cuLaunchKernel %.2f us" % per_launch(lambda: drv.cuLaunchKernel(fnobj, 1, 1, 1, 32, 1, 1, 0, 0, slots.params_address, 0)))
cProfile.run("for _ in range(20000): lau(d, d, d, a, n)", "/tmp/prof")
pstats.Stats("/tmp/prof").sort_stats("tottime").print_stats(14)
