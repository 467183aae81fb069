// Index math, boundary helpers and halo kernels shared by every lattice (D2Q9, D3Q19, ...).
//
// Layout: populations are structure-of-arrays with one ghost layer all round, population q
// occupying a contiguous "plane" of `plane` elements, the contiguous axis i fastest. A halo
// "layer" is the set of cells at one index of the split (slowest) axis: a row in 2D, an
// xy-plane in 3D; it is contiguous within each population.
//
// Offsets are 64-bit: a 512^3 D3Q19 field holds 2.6e9 populations, beyond int32.
//
// The lattice struct L (D2Q9, ...) and the FLAG_* codes come from the generated header.
#ifndef SIMSPLIT_LBM_COMMON_CUH
#define SIMSPLIT_LBM_COMMON_CUH

#include "simsplit_generated.cuh"

namespace lbm {

using index_t = long long;
// in-plane offset (D3Q19): a cell's index within one population's array; the launcher keeps
// every plane below 2^32 cells
using offset_t = unsigned int;
using flag_t = unsigned char;

static_assert(FLAG_FLUID == 0, "fluid cells must have flag 0");
static_assert((FLAG_SOLID & FLAG_NEAR_WALL) == 0, "NEAR_WALL must not overlap the solid kinds");

// Source column of a pull from column i (1-based interior) along dx in {-1, 0, 1}; with
// periodic x the ghost columns are never read, the opposite interior column is.
__device__ __forceinline__ int source_column(int i, int dx, int nx, bool periodic)
{
    const int s = i + dx;
    if (!periodic) return s;
    return s < 1 ? nx : (s > nx ? 1 : s);
}

// Column i + dx for |dx| <= 2 (quadratic bounce-back reads two cells away), wrapped where
// periodic.
__device__ __forceinline__ int far_column(int i, int dx, int nx, bool periodic)
{
    const int s = i + dx;
    if (!periodic) return s;
    return s < 1 ? s + nx : (s > nx ? s - nx : s);
}

// Read-only loads that ask the L2 to fetch BYTES (64, 128 or 256) around a miss rather than
// the missing sectors alone (PTX .L2::<n>B prefetch size): fp16 populations always (a warp's
// 2-byte loads ask for 64 B per population, and the neighbouring warps' rows arrive with them:
// 1.4-2.6 % faster on an H200), other types under SIMSPLIT_L2_FETCH_BYTES (tuning; float32
// ran 0.5 % slower with 256 B: benchmarks/logs/tune_d3q19_h200_2026-12-03_l2.log).
#if defined(SIMSPLIT_HOST_EMULATION)
#define SIMSPLIT_LD_L2(bytes, type, reg, v, p) v = __ldg(p)
#else
#define SIMSPLIT_STRINGIFY_(x) #x
#define SIMSPLIT_STRINGIFY(x) SIMSPLIT_STRINGIFY_(x)
#define SIMSPLIT_LD_L2(bytes, type, reg, v, p)                                                \
    asm("ld.global.nc.L2::" SIMSPLIT_STRINGIFY(bytes) "B." type " %0, [%1];" : "=" reg(v)  \
        : "l"(p))
#endif
#ifndef SIMSPLIT_FP16_L2_FETCH_BYTES
#define SIMSPLIT_FP16_L2_FETCH_BYTES 256
#endif

template <typename T>
__device__ __forceinline__ T load_l2_fetch(const T* p)
{
    return __ldg(p);
}
#ifdef SIMSPLIT_L2_FETCH_BYTES
__device__ __forceinline__ float load_l2_fetch(const float* p)
{
    float v;
    SIMSPLIT_LD_L2(SIMSPLIT_L2_FETCH_BYTES, "f32", "f", v, p);
    return v;
}
__device__ __forceinline__ double load_l2_fetch(const double* p)
{
    double v;
    SIMSPLIT_LD_L2(SIMSPLIT_L2_FETCH_BYTES, "f64", "d", v, p);
    return v;
}
#endif

// Population traffic: every value is read once and written once per step, so the variants
// that tell the caches so (evict-first loads/stores) are selectable for tuning.
template <typename T>
__device__ __forceinline__ T load_population(const T* p)
{
#if defined(SIMSPLIT_STREAMING_LOADS)
    return __ldcs(p);
#else
    return load_l2_fetch(p);
#endif
}

template <typename T>
__device__ __forceinline__ void store_population(T* p, T v)
{
#ifdef SIMSPLIT_STREAMING_STORES
    __stcs(p, v);
#else
    *p = v;
#endif
}

// --- population storage narrower than the arithmetic (run.storage) ----------------------------
// A storage type S narrower than the arithmetic type T holds the deviation from the rest
// equilibrium at unit density, (f_q - w_q) * scale, rounded to nearest (even): the deviation is
// small (|u| <= 0.2, rho near 1), so the storage's relative precision lands on what varies, not
// on the constant w_q. scale is a power of two (exact): 1 for float, SIMSPLIT_FP16_SCALE for
// half16, which moves fp16's subnormal range (|x| < 6.1e-5) below the smallest deviations that
// matter. Equal T and S store f_q itself, unchanged. simsplit/numerics/storage.py
// (PopulationStorage) and simsplit/backends/cpu/storage_codec.py do exactly the same operations.

// 16 bits of a storage format (F: FP16 IEEE binary16, E4M11 the project's 1-4-11 format,
// simsplit/numerics/storage.py); a struct, so it never converts implicitly
enum bits16_format { FP16 = 0, E4M11 = 1 };
template <int F> struct bits16 {
    unsigned short bits;
};
using half16 = bits16<FP16>;
using e4m11 = bits16<E4M11>;

#ifdef SIMSPLIT_HOST_EMULATION  // host C++ (tests/test_kernels_compile.py): the compiler's _Float16
__host__ __device__ inline float half_to_float(unsigned short h)
{
    _Float16 x;
    __builtin_memcpy(&x, &h, 2);
    return static_cast<float>(x);
}
__host__ __device__ inline unsigned short half_from(float v)
{
    const _Float16 x = static_cast<_Float16>(v);
    unsigned short h;
    __builtin_memcpy(&h, &x, 2);
    return h;
}
__host__ __device__ inline unsigned short half_from(double v)
{
    const _Float16 x = static_cast<_Float16>(v);
    unsigned short h;
    __builtin_memcpy(&h, &x, 2);
    return h;
}
#else  // PTX conversions: no cuda_fp16.h needed by NVRTC; one rounding, also from double
__device__ __forceinline__ float half_to_float(unsigned short h)
{
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h));
    return v;
}
__device__ __forceinline__ unsigned short half_from(float v)
{
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
__device__ __forceinline__ unsigned short half_from(double v)
{
    unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(v));
    return h;
}
#endif

// e4m11 (simsplit/numerics/storage.py): sign, 4 exponent bits (bias 7; 15: inf and NaN), 11
// stored significand bits; subnormal steps of 2^-17 below 2^-6.
__host__ __device__ inline unsigned int float_bits(float v)
{
#ifdef SIMSPLIT_HOST_EMULATION
    unsigned int u;
    __builtin_memcpy(&u, &v, 4);
    return u;
#else
    return __float_as_uint(v);
#endif
}
__host__ __device__ inline unsigned long long float_bits(double v)
{
#ifdef SIMSPLIT_HOST_EMULATION
    unsigned long long u;
    __builtin_memcpy(&u, &v, 8);
    return u;
#else
    return static_cast<unsigned long long>(__double_as_longlong(v));
#endif
}

__host__ __device__ inline float bits_float(unsigned int u)
{
#ifdef SIMSPLIT_HOST_EMULATION
    float x;
    __builtin_memcpy(&x, &u, 4);
    return x;
#else
    return __uint_as_float(u);
#endif
}

// Exact, and without float subnormals (a GPU may flush them: the first version built
// x * 2^-120 from one and decoded every e4m11 subnormal as zero on an H200,
// scripts/check_codec_gpu.py): exponent field 1-14 rebiased into a normal float (15: inf or
// NaN), field 0 the significand times the subnormal step, both selected without a branch.
__host__ __device__ inline float e4m11_to_float(unsigned short h)
{
    constexpr int mant = SIMSPLIT_E4M11_MANT_BITS, bias = SIMSPLIT_E4M11_BIAS;
    const unsigned int e = (h >> mant) & 15u;
    const unsigned int m = h & ((1u << mant) - 1u);
    const unsigned int field = e == 15u ? 255u : e + 127u - bias;
    const float normal = bits_float((field << 23) | (m << (23 - mant)));
    const float step = bits_float(static_cast<unsigned int>(127 - (bias - 1 + mant)) << 23);
    const float x = e == 0u ? float(m) * step : normal;
    return (h & 0x8000u) ? -x : x;
}

// One rounding to nearest even onto the e4m11 grid, in integer operations on the float's bits
// and one add. Normal: the bits rounded to 11 stored significand bits on the pattern (a carry
// runs into the exponent, past the largest finite into inf), rebiased. Below 2^-6: adding
// 2^6 (float; 2^35 for double), whose ulp is the subnormal step 2^-17, rounds a onto that grid
// once; the sum's low bits are the subnormal's (a carry gives the smallest normal's bits).
template <typename T>
__host__ __device__ inline unsigned short e4m11_from(T v)
{
    constexpr int mant = SIMSPLIT_E4M11_MANT_BITS, bias = SIMSPLIT_E4M11_BIAS;
    constexpr int width = 8 * sizeof(T), frac = sizeof(T) == 4 ? 23 : 52;
    constexpr int drop = frac - mant;  // significand bits dropped
    constexpr int ebias = sizeof(T) == 4 ? 127 : 1023;
    constexpr unsigned int inf = 15u << mant;
    const auto u = float_bits(v);
    using U = decltype(u + 0u);
    const U mag = u & ~(U(1) << (width - 1));
    const unsigned int sign = static_cast<unsigned int>(u >> (width - 16)) & 0x8000u;
    // NaN: its bits round past inf below; the significand's ones keep it a NaN
    const unsigned int nan = mag > U(2 * ebias + 1) << frac ? (1u << mant) - 1u : 0u;
    unsigned int bits;
    if (mag < U(ebias + 1 - bias) << frac) {  // below 2^-6
        const T step_up = T(1ull << (frac - mant - bias + 1));  // 2^6 or 2^35: ulp 2^-17
        const T a = v < T(0) ? -v : v;
        bits = static_cast<unsigned int>(float_bits(a + step_up) - float_bits(step_up));
    } else {
        const U r = (mag + ((U(1) << (drop - 1)) - 1) + ((mag >> drop) & 1)) >> drop;
        const U b = r - (U(ebias - bias) << mant);
        bits = b >= inf ? inf : static_cast<unsigned int>(b);
    }
    return static_cast<unsigned short>(sign | bits | nan);
}

template <int F>
__device__ __forceinline__ bits16<F> load_population(const bits16<F>* p)
{
    const unsigned short* bits = reinterpret_cast<const unsigned short*>(p);
#if defined(SIMSPLIT_STREAMING_LOADS) || SIMSPLIT_FP16_L2_FETCH_BYTES == 0
    return bits16<F>{load_population(bits)};
#else
    unsigned short v;
    SIMSPLIT_LD_L2(SIMSPLIT_FP16_L2_FETCH_BYTES, "u16", "h", v, bits);
    return bits16<F>{v};
#endif
}

// A population of an array the kernel also writes (the in-place AA kernel: every slot is read
// and then written by one thread only): plain loads, not the read-only path; fp16 asks the L2
// for the same fetch size as load_population.
template <typename S>
__device__ __forceinline__ S load_in_place(const S* p)
{
    return *p;
}

template <int F>
__device__ __forceinline__ bits16<F> load_in_place(const bits16<F>* p)
{
#if defined(SIMSPLIT_HOST_EMULATION) || SIMSPLIT_FP16_L2_FETCH_BYTES == 0
    return *p;
#else
    unsigned short v;
    asm volatile("ld.global.L2::" SIMSPLIT_STRINGIFY(SIMSPLIT_FP16_L2_FETCH_BYTES) "B.u16 %0, [%1];"
                 : "=h"(v)
                 : "l"(p)
                 : "memory");
    return bits16<F>{v};
#endif
}

template <int F>
__device__ __forceinline__ void store_population(bits16<F>* p, bits16<F> v)
{
    store_population(reinterpret_cast<unsigned short*>(p), v.bits);
}

// read-only cached load of one stored element (the rare bounce-back reads)
template <typename S>
__device__ __forceinline__ S read_only(const S* p)
{
    return __ldg(p);
}

template <int F>
__device__ __forceinline__ bits16<F> read_only(const bits16<F>* p)
{
    return bits16<F>{__ldg(reinterpret_cast<const unsigned short*>(p))};
}

template <typename A, typename B> struct same_type { static constexpr bool value = false; };
template <typename A> struct same_type<A, A> { static constexpr bool value = true; };
// A compile-time int as a value (a tag argument that picks a code path in a generic lambda).
template <int V> struct constant { static constexpr int value = V; };

template <typename S> struct storage_scale { static constexpr double value = 1.0; };
template <> struct storage_scale<half16> { static constexpr double value = SIMSPLIT_FP16_SCALE; };
template <> struct storage_scale<e4m11> { static constexpr double value = SIMSPLIT_E4M11_SCALE; };

// exact widening of a stored element
template <typename T> __device__ __forceinline__ T widen(float v) { return T(v); }
template <typename T> __device__ __forceinline__ T widen(double v) { return T(v); }
template <typename T> __device__ __forceinline__ T widen(half16 v)
{
    return T(half_to_float(v.bits));
}
template <typename T> __device__ __forceinline__ T widen(e4m11 v)
{
    return T(e4m11_to_float(v.bits));
}

// one rounding (to nearest even) into the storage type
template <typename S> struct narrow;
template <> struct narrow<float> {
    template <typename T> __device__ __forceinline__ static float to(T v) { return float(v); }
};
template <> struct narrow<double> {
    template <typename T> __device__ __forceinline__ static double to(T v) { return double(v); }
};
template <> struct narrow<half16> {
    template <typename T> __device__ __forceinline__ static half16 to(T v)
    {
        return half16{half_from(v)};
    }
};
template <> struct narrow<e4m11> {
    template <typename T> __device__ __forceinline__ static e4m11 to(T v)
    {
        return e4m11{e4m11_from(v)};
    }
};

// a * b + c rounded once, for an exact product a * b (b a power of two, no subnormal): the
// same bits as the CPU kernels' two roundings of a * b + c, in one instruction. --fmad=false
// contracts nothing on its own, so these are the only fused operations (the compile test
// builds with SIMSPLIT_UNFUSED_CODING, two roundings, and finds no fma left).
template <typename T>
__device__ __forceinline__ T exact_product_add(T a, T b, T c)
{
#if defined(SIMSPLIT_UNFUSED_CODING)
    return a * b + c;
#elif defined(SIMSPLIT_HOST_EMULATION)
    if constexpr (sizeof(T) == 4) return __builtin_fmaf(a, b, c);
    else return __builtin_fma(a, b, c);
#else
    if constexpr (sizeof(T) == 4) return __fmaf_rn(a, b, c);
    else return __fma_rn(a, b, c);
#endif
}

// Hide a value's origin from the compiler, so that an expression on it is computed again
// rather than kept live from an identical earlier one (register pressure).
__device__ __forceinline__ void opaque(float& v)
{
#ifndef SIMSPLIT_HOST_EMULATION
    asm volatile("" : "+f"(v));
#endif
}
__device__ __forceinline__ void opaque(double& v)
{
#ifndef SIMSPLIT_HOST_EMULATION
    asm volatile("" : "+d"(v));
#endif
}

// Stored element of population q -> f_q in the arithmetic type T.
template <typename L, typename T, typename S>
__device__ __forceinline__ T decode(S raw, int q)
{
    if constexpr (same_type<T, S>::value) {
        return raw;
    } else {
        return exact_product_add(widen<T>(raw), T(1.0 / storage_scale<S>::value), T(L::w(q)));
    }
}

// f_q in the arithmetic type T -> stored element of population q.
template <typename L, typename T, typename S>
__device__ __forceinline__ S encode(T v, int q)
{
    if constexpr (same_type<T, S>::value) {
        return v;
    } else {
        // (v - w) * scale: the product by a power of two is exact, so scale * v - scale * w
        // rounded once gives the same bits
        constexpr double scale = storage_scale<S>::value;
        return narrow<S>::to(exact_product_add(v, T(scale), -T(T(L::w(q)) * T(scale))));
    }
}

// Population q at p, loaded (streaming hint as above) and decoded.
template <typename L, typename T, typename S>
__device__ __forceinline__ T load_population(const S* p, int q)
{
    return decode<L, T>(load_population(p), q);
}

// Population q encoded and stored at p.
template <typename L, typename T, typename S>
__device__ __forceinline__ void store_population(S* p, int q, T v)
{
    store_population(p, encode<L, T, S>(v, q));
}

// --- pairs of adjacent x-cells (d3q19.cu with SIMSPLIT_D3Q19_CELLS_X == 2) ------------------
// Two stored elements of one population at columns (i, i + 1) travel as one 2-element vector:
// 32 bits for fp16, 64 for float, 128 for double. 2-byte loads keep too few bytes in flight per
// thread for fp16 to reach the bandwidth; a vector moves both cells' elements at once.
// A vector access needs an address aligned to its size: the caller guarantees that own cells
// (odd i, padded rows) are; a pull from x -+ 1 (an even column) is split into the two aligned
// words around it, whose middle halves are the pair.
template <typename S, typename P> struct vector_pair {
    using type = P;  // CUDA's float2/double2: x the lower address
    __device__ __forceinline__ static S get(P p, int c) { return c ? p.y : p.x; }
    __device__ __forceinline__ static P make(S a, S b) { return P{a, b}; }
    __device__ __forceinline__ static P with_first(P p, S a) { return P{a, p.y}; }
    __device__ __forceinline__ static P with_second(P p, S b) { return P{p.x, b}; }
    __device__ __forceinline__ static P middle(P lo, P hi) { return P{lo.y, hi.x}; }
};
template <typename S> struct pair_of;
template <> struct pair_of<float> : vector_pair<float, float2> {};
template <> struct pair_of<double> : vector_pair<double, double2> {};
template <int F> struct pair_of<bits16<F>> {  // one 32-bit word, the lower address low
    using type = unsigned int;
    __device__ __forceinline__ static bits16<F> get(unsigned int p, int c)
    {
        return bits16<F>{static_cast<unsigned short>(c ? p >> 16 : p & 0xFFFFu)};
    }
    __device__ __forceinline__ static unsigned int make(bits16<F> a, bits16<F> b)
    {
        return a.bits | (static_cast<unsigned int>(b.bits) << 16);
    }
    __device__ __forceinline__ static unsigned int with_first(unsigned int p, bits16<F> a)
    {
        return (p & 0xFFFF0000u) | a.bits;
    }
    // one PRMT (make(get(p, 0), b) took a mask and two)
    __device__ __forceinline__ static unsigned int with_second(unsigned int p, bits16<F> b)
    {
        return __byte_perm(p, b.bits, 0x5410);  // bytes 0, 1 of p, then bytes 0, 1 of b
    }
    __device__ __forceinline__ static unsigned int middle(unsigned int lo, unsigned int hi)
    {
        return __byte_perm(lo, hi, 0x5432);  // bytes 2, 3 of lo, then bytes 0, 1 of hi
    }
};
template <typename S> using pair_t = typename pair_of<S>::type;

// Elements p[0], p[1] as a pair; p aligned to the pair (aligned, folds to a constant after
// unrolling) or one element past an aligned word (the pair straddles two words). The unused
// outer halves may lie past a row's ghost columns (p[-1], p[2]); an aligned word holding one
// element of the array cannot leave its allocation, and those halves are never used.
// One aligned pair word: 16-bit formats ask the L2 for the fetch size of their scalar loads
// (load_population above), the others take the read-only path as their elements do.
template <typename S>
__device__ __forceinline__ pair_t<S> load_pair_word(const S* p)
{
    return load_population(reinterpret_cast<const pair_t<S>*>(p));
}
#if !defined(SIMSPLIT_STREAMING_LOADS) && SIMSPLIT_FP16_L2_FETCH_BYTES != 0
template <int F>
__device__ __forceinline__ unsigned int load_pair_word(const bits16<F>* p)
{
    const unsigned int* word = reinterpret_cast<const unsigned int*>(p);
    unsigned int v;
    SIMSPLIT_LD_L2(SIMSPLIT_FP16_L2_FETCH_BYTES, "u32", "r", v, word);
    return v;
}
#endif

template <typename S>
__device__ __forceinline__ pair_t<S> load_pair(const S* p, bool aligned)
{
    if (aligned) return load_pair_word(p);
    return pair_of<S>::middle(load_pair_word(p - 1), load_pair_word(p + 1));
}

// A pair stored at p[0], p[1], p aligned to the pair. Through the store intrinsics: a
// plain assignment of a float2 or double2 compiles to two scalar stores (nvcc 13, sm_90).
template <typename S>
__device__ __forceinline__ void store_pair(S* p, pair_t<S> v)
{
#ifdef SIMSPLIT_STREAMING_STORES
    __stcs(reinterpret_cast<pair_t<S>*>(p), v);
#else
    __stwb(reinterpret_cast<pair_t<S>*>(p), v);  // default write-back
#endif
}

// What a solid pull source sends back: halfway bounce-back of the cell's own opposite
// population, plus the momentum of the lid (moving along +x at lid_u). The product is written
// exactly as the CPU kernel writes it, T(6 w c_x) * u, so both round identically.
template <typename L, typename T>
__device__ __forceinline__ T bounce_back(int q, flag_t kind, T own_opposite, T lid_u)
{
    T v = own_opposite;
    if (kind == FLAG_LID) v += T(6.0 * L::w(q) * L::cx(q)) * lid_u;
    return v;
}

}  // namespace lbm

// Halo pack: the N_CROSS populations of set `set` (0 = crossing upwards, 1 = downwards) in
// layer `layer` of f -> buf[k][n], n < layer_size, one thread per element, blockIdx.y = k.
// A layer is `layer_size` cells in rows of `row_len`, rows `row_pitch` apart, layers
// `layer_stride` apart, populations `plane` apart (in elements: padded rows on GPUs, see
// simsplit/backends/layout.py); the buffer is dense. In 2D a layer is one row.
template <typename L, typename T>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
lbm_pack(const T* __restrict__ f, T* __restrict__ buf, lbm::index_t plane,
         lbm::index_t layer_stride, lbm::index_t row_pitch, int row_len, int layer_size,
         int layer, int set)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= layer_size) return;
    const int k = blockIdx.y;
    const int r = n / row_len;
    const lbm::index_t src = L::halo(set, k) * plane + layer * layer_stride + r * row_pitch
                             + (n - r * row_len);
    buf[lbm::index_t(k) * layer_size + n] = f[src];
}

// Halo unpack: the inverse of lbm_pack, into (usually ghost) layer `layer`.
template <typename L, typename T>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
lbm_unpack(const T* __restrict__ buf, T* __restrict__ f, lbm::index_t plane,
           lbm::index_t layer_stride, lbm::index_t row_pitch, int row_len, int layer_size,
           int layer, int set)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= layer_size) return;
    const int k = blockIdx.y;
    const int r = n / row_len;
    const lbm::index_t dst = L::halo(set, k) * plane + layer * layer_stride + r * row_pitch
                             + (n - r * row_len);
    f[dst] = buf[lbm::index_t(k) * layer_size + n];
}

#endif  // SIMSPLIT_LBM_COMMON_CUH
