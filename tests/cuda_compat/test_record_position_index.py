"""A record indexed by a constant position (``r[0]``, ``r[-1]``) is its field there, as NumPy
and numba index records (issue 28: only a field name was taken)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit import types as T
from kaiojit.errors import TypingError

rng = np.random.default_rng()
REC = np.dtype([("g", np.int32), ("h", np.float32, 2), ("k", np.float64)], align=True)


def by_position(recs, out_g, out_k, out_h1):
    i = cuda.grid(1)
    if i < recs.size:
        r = recs[i]
        out_g[i] = r[0]
        out_k[i] = r[-1]
        out_h1[i] = r[1][1]
        r[0] = r[0] + 1


def past_the_end(recs, out):
    out[0] = recs[0][3]


def test_fields_by_position(kj_backend):
    n = int(rng.integers(3, 30))
    recs = np.zeros(n, REC)
    recs["g"] = rng.integers(-99, 99, n)
    recs["h"] = rng.standard_normal((n, 2))
    recs["k"] = rng.standard_normal(n)
    d = cuda.to_device(recs)
    outs = [cuda.to_device(np.full(n, -7, np.int32)), cuda.to_device(np.full(n, np.nan)),
            cuda.to_device(np.full(n, np.nan, np.float32))]
    cuda.jit(by_position)[1, 32](d, *outs)
    np.testing.assert_array_equal(outs[0].copy_to_host(), recs["g"])
    np.testing.assert_array_equal(outs[1].copy_to_host(), recs["k"])
    np.testing.assert_array_equal(outs[2].copy_to_host(), recs["h"][:, 1])
    np.testing.assert_array_equal(d.copy_to_host()["g"], recs["g"] + 1)


def test_position_past_the_last_field_is_refused():
    with pytest.raises(TypingError, match="record index 3 is out of range: the record has 3 "
                                          "fields") as info:
        cuda.jit((T.from_dtype(REC)[::1], T.float64[::1]))(past_the_end)
    line = past_the_end.__code__.co_firstlineno + 1
    assert f"test_record_position_index.py:{line}:22:" in str(info.value)
