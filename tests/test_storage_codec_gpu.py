"""The 16-bit population codecs of kernels/lbm_common.cuh on a GPU against
simsplit.numerics.storage, value for value (issue 25).

Decodes every one of the 65,536 fp16 and e4m11 bit patterns on the device (float and double
arithmetic) and encodes a spread of float32 and float64 deviations (normals, the subnormal
range, ties, the largest finite and beyond), comparing each result with NumPy's bits. The host
emulation cannot see what this sees: the first e4m11 decoder built a float subnormal, which
the H200 flushed to zero (every e4m11 subnormal decoded as 0, 2026-12-04).
"""

from __future__ import annotations

import numpy as np
import pytest

from simsplit.numerics import storage as st

pytestmark = pytest.mark.gpu

KERNELS = r"""
template <typename T, typename S>
__global__ void widen_all(T* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 65536) out[i] = lbm::widen<T>(S{static_cast<unsigned short>(i)});
}
template <typename T, typename S>
__global__ void narrow_all(const T* v, unsigned short* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lbm::narrow<S>::to(v[i]).bits;
}
"""


def values(dtype) -> np.ndarray:
    rng = np.random.default_rng(3)
    mags = np.concatenate([10.0 ** rng.uniform(-9, 3, 200_000), 2.0 ** np.arange(-30, 12),
                           (np.arange(1, 4096) + 0.5) * 2.0 ** -17,  # ties on the subnormal grid
                           (1 + (np.arange(2048) + 0.5) / 2048) * 2.0 ** -3])  # normal ties
    v = np.concatenate([mags, -mags, [0.0, -0.0, np.inf, -np.inf]]).astype(dtype)
    return v


@pytest.mark.parametrize("arith", ["float", "double"])
@pytest.mark.parametrize("fmt", ["half16", "e4m11"])
def test_codec_on_the_gpu_equals_numpy(arith: str, fmt: str) -> None:
    cupy = pytest.importorskip("cupy")
    from simsplit.backends import gpu_count

    if gpu_count() == 0:
        pytest.skip("no GPU")
    from simsplit.backends.cuda_c import source
    from simsplit.backends.cuda_c.d2q9 import compile_options

    src = source.kernel_source("d2q9.cu") + KERNELS
    t, s_name = arith, f"lbm::{fmt}"
    dt = np.float32 if t == "float" else np.float64
    names = [f"widen_all<{t}, {s_name}>", f"narrow_all<{t}, {s_name}>"]
    mod = cupy.RawModule(code=src, options=compile_options(cupy.cuda.Device().id),
                         name_expressions=names)
    if fmt == "half16":
        ref_dec = lambda b: b.view(np.float16).astype(np.float64)  # noqa: E731
        ref_enc = lambda v: v.astype(np.float16).view(np.uint16)  # noqa: E731
    else:
        ref_dec, ref_enc = st.e4m11_to_float, st.e4m11_from
    bits = np.arange(65536, dtype=np.uint16)
    out = cupy.empty(65536, dt)
    mod.get_function(names[0])((256,), (256,), (out,))
    got = cupy.asnumpy(out)
    with np.errstate(invalid="ignore"):
        want = np.asarray(ref_dec(bits)).astype(dt)
    ui = np.uint32 if dt == np.float32 else np.uint64
    differ = np.flatnonzero((got.view(ui) != want.view(ui)) & ~(np.isnan(got) & np.isnan(want)))
    assert differ.size == 0, (f"{differ.size} decodes differ, first bits {differ[0]:#06x}: "
                              f"{got[differ[0]]!r} against {want[differ[0]]!r}")
    v = values(dt)
    enc = cupy.empty(v.size, np.uint16)
    mod.get_function(names[1])(((v.size + 255) // 256,), (256,),
                               (cupy.asarray(v), enc, np.int32(v.size)))
    got_e = cupy.asnumpy(enc)
    want_e = np.asarray(ref_enc(v)).view(np.uint16)
    differ = np.flatnonzero(got_e != want_e)
    assert differ.size == 0, (f"{differ.size} encodes differ, first {v[differ[0]]!r}: "
                              f"{got_e[differ[0]]:#06x} against {want_e[differ[0]]:#06x}")
