// Forces on bodies by momentum exchange (Wen et al. 2014), summed exactly on the device: one
// thread per fluid-to-body link of a slab (the table simsplit/numerics/momentum_exchange.py
// describes, built once), each link's momentum along every axis added exactly into the limbs
// of its body's sum (exact_sum.cuh). The host reads n_bodies x dim limb rows, no populations.
//
// The arithmetic is SlabLinkTable.momentum's operation for operation (decode in the arithmetic
// type, then double; compiled with --fmad=false), so every backend gets the same momentum per
// link and, the sums being exact, the same force bits on every split.
#include "simsplit_generated.cuh"
#include "lbm_common.cuh"
#include "exact_sum.cuh"
#include "neq_records.cuh"

namespace {

// A stored population in double: decoded as PopulationStorage.decode does (x * inv_scale + w
// in the arithmetic type T where the storage S is shifted), then widened exactly.
template <typename T, typename S>
__device__ __forceinline__ double decoded(const S* __restrict__ f, long long at, T inv_scale,
                                          double w, bool shifted)
{
    T x = lbm::widen<T>(lbm::read_only(f + at));
    if (shifted) x = x * inv_scale + T(w);
    return double(x);
}

// The momentum of link i along every axis added into its body's limbs: read(at, w) is the
// population at element offset `at` (of weight w) in double.
template <typename Read>
__device__ __forceinline__ void add_link(int i, const Read& read,
                                         const long long* __restrict__ at_out,
                                         const long long* __restrict__ at_in,
                                         const long long* __restrict__ at_nb,
                                         const long long* __restrict__ at_far,
                                         const double* __restrict__ w_out,
                                         const double* __restrict__ w_in,
                                         const double* __restrict__ w_far,
                                         const double* __restrict__ k,
                                         const double* __restrict__ w1,
                                         const double* __restrict__ w2,
                                         const double* __restrict__ c,
                                         const int* __restrict__ body, int dim,
                                         unsigned long long* __restrict__ acc,
                                         int* __restrict__ nonfinite)
{
    const double kk = k[i];
    const double f_out = read(at_out[i], w_out[i]);
    // the population the wall rule returns (bodies at rest; halfway: k = -1, w1 = w2 = 0;
    // linear: w1 = 1 - |k|, w2 = 0; quadratic: w2 times the far population)
    double f_back;
    if (kk >= 0.0)
        f_back = kk * f_out + w1[i] * read(at_nb[i], w_out[i]);
    else
        f_back = (-kk) * f_out + w1[i] * read(at_in[i], w_in[i]);
    f_back = f_back + w2[i] * read(at_far[i], w_far[i]);
    const double u_wall = 0.0;
    for (int a = 0; a < dim; ++a) {
        const double ca = c[(long long)i * dim + a];
        const double m = (ca - u_wall) * f_out - (-ca - u_wall) * f_back;
        exact_add(acc + ((long long)body[i] * dim + a) * SIMSPLIT_EXACT_LIMBS,
                  (unsigned long long)__double_as_longlong(m), nonfinite);
    }
}

}  // namespace

// acc: (n_bodies * dim) rows of SIMSPLIT_EXACT_LIMBS limbs, body-major; c: (n, dim) doubles.
template <typename T, typename S>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
link_force_sums(const S* __restrict__ f, int n, const long long* __restrict__ at_out,
                const long long* __restrict__ at_in, const long long* __restrict__ at_nb,
                const long long* __restrict__ at_far, const double* __restrict__ w_out,
                const double* __restrict__ w_in, const double* __restrict__ w_far,
                const double* __restrict__ k, const double* __restrict__ w1,
                const double* __restrict__ w2, const double* __restrict__ c,
                const int* __restrict__ body, int dim, T inv_scale, int shifted,
                unsigned long long* __restrict__ acc, int* __restrict__ nonfinite)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bool sh = shifted != 0;
    const auto read = [&](long long at, double w) { return decoded(f, at, inv_scale, w, sh); };
    add_link(i, read, at_out, at_in, at_nb, at_far, w_out, w_in, w_far, k, w1, w2, c, body, dim,
             acc, nonfinite);
}

// The same on run.storage neq16 records of lattice L (neq_records.cuh; S neq::srec: neq16s's
// stress-kept records): each population rebuilt in float32 from its cell's record, as the
// stream kernels rebuild it; an offset is q plane + the cell's offset in a slot plane (`plane`
// elements between slots).
template <typename L, typename S = neq::rec>
__global__ void __launch_bounds__(SIMSPLIT_BLOCK_X)
link_force_sums_neq(const S* __restrict__ f, int n,
                    const long long* __restrict__ at_out, const long long* __restrict__ at_in,
                    const long long* __restrict__ at_nb, const long long* __restrict__ at_far,
                    const double* __restrict__ w_out, const double* __restrict__ w_in,
                    const double* __restrict__ w_far, const double* __restrict__ k,
                    const double* __restrict__ w1, const double* __restrict__ w2,
                    const double* __restrict__ c, const int* __restrict__ body, int dim,
                    long long plane, unsigned long long* __restrict__ acc,
                    int* __restrict__ nonfinite)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const auto read = [&](long long at, double) {
        return double(neq::pull<L>(f, int(at / plane), plane, at % plane));
    };
    add_link(i, read, at_out, at_in, at_nb, at_far, w_out, w_in, w_far, k, w1, w2, c, body, dim,
             acc, nonfinite);
}
