// Exact sums on the device for the MD thermo (included by md_lj.cu): every value is added
// exactly into 32-bit limbs (exact_sum.cuh), in one of SIMSPLIT_MD_SUM_REPLICAS copies to
// spread contention; md_exact_merge adds the copies.
#include "exact_sum.cuh"

template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_exact_accumulate(const long long* __restrict__ bits, int n, int quantity,
                    unsigned long long* __restrict__ acc, int* __restrict__ nonfinite)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    exact_add(acc + ((long long)(blockIdx.x % SIMSPLIT_MD_SUM_REPLICAS)
                     * SIMSPLIT_MD_SUM_QUANTITIES + quantity) * SIMSPLIT_MD_SUM_LIMBS,
              (unsigned long long)bits[i], nonfinite);
}

// out[t] = the replicas' limb t added (two's complement: the signed sum), replicas cleared;
// out[width] = the non-finite flag, cleared: the one small read of a thermo step.
template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_exact_merge(unsigned long long* __restrict__ acc, int* __restrict__ nonfinite,
               long long* __restrict__ out)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int width = SIMSPLIT_MD_SUM_QUANTITIES * SIMSPLIT_MD_SUM_LIMBS;
    if (t == 0) {
        out[width] = nonfinite[0];
        nonfinite[0] = 0;
    }
    if (t >= width) return;
    unsigned long long s = 0ULL;
    for (int r = 0; r < SIMSPLIT_MD_SUM_REPLICAS; ++r) {
        s += acc[(long long)r * width + t];
        acc[(long long)r * width + t] = 0ULL;
    }
    out[t] = (long long)s;
}

// m |v|^2 per owned atom in double, the CPU's kinetic_per_atom operation for operation.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_kinetic(const T* __restrict__ v, int n, double mass, double* __restrict__ mv2)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double a = double(v[3LL * i]), b = double(v[3LL * i + 1]), c = double(v[3LL * i + 2]);
    mv2[i] = mass * (a * a + b * b + c * c);
}

// md_kinetic with a mass per atom type (masses[typ[i]]): the same product as the host's
// mass * |v|^2 per atom, so runs with several masses keep exact device sums.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_kinetic_typed(const T* __restrict__ v, const int* __restrict__ typ, int n,
                 const double* __restrict__ masses, double* __restrict__ mv2)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double a = double(v[3LL * i]), b = double(v[3LL * i + 1]), c = double(v[3LL * i + 2]);
    mv2[i] = masses[typ[i]] * (a * a + b * b + c * c);
}

// flag[0] = 1 if a position or velocity of the first n rows is not finite (a - a is 0 for
// every finite a, NaN otherwise): the health check of a run reads one integer, not the atoms.
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_nonfinite(const T* __restrict__ x, const T* __restrict__ v, int n, int* __restrict__ flag)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        const double a = double(x[3LL * i + d]), b = double(v[3LL * i + d]);
        if (!(a - a == 0.0) || !(b - b == 0.0)) flag[0] = 1;
    }
}

// v *= alpha on the first n rows (a global velocity rescaling thermostat: alpha comes from the
// host, the same number for every slab).
template <typename T>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_scale_rows(T* __restrict__ v, int n, double alpha)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 3 * n) return;
    v[i] = T(double(v[i]) * alpha);
}
