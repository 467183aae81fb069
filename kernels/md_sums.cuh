// Exact sums on the device for the MD thermo (included by md_lj.cu).
//
// The CPU sums per-atom values with math.fsum (correctly rounded), which no split or thread
// count changes. The device gets the same bits by adding every value exactly: a double is
// m * 2^(b - 1074) with m < 2^53 and 0 <= b < 2047, so m shifted by b mod 32 spans three 32-bit
// limbs of a fixed-point number whose lowest bit is 2^-1074. Each piece (< 2^32) is added with
// an integer atomic into its limb (64 bits: fewer than 2^31 values cannot overflow one), in one
// of SIMSPLIT_MD_SUM_REPLICAS copies to spread contention; md_exact_merge adds the copies. The
// host adds the limbs as one integer and rounds it once: the correctly rounded sum, fsum's.
// Integer additions commute, so the order of the atomics does not matter.

template <typename I>
__global__ void __launch_bounds__(SIMSPLIT_MD_BLOCK)
md_exact_accumulate(const long long* __restrict__ bits, int n, int quantity,
                    unsigned long long* __restrict__ acc, int* __restrict__ nonfinite)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned long long u = (unsigned long long)bits[i];
    const int ex = int((u >> 52) & 0x7ffULL);
    if (ex == 0x7ff) {  // inf or nan: the host takes fsum's path (and its errors)
        nonfinite[0] = 1;
        return;
    }
    unsigned long long m = u & 0xfffffffffffffULL;
    int b = 0;
    if (ex != 0) {
        m |= 1ULL << 52;
        b = ex - 1;
    }
    if (m == 0ULL) return;
    const int s = b & 31;
    const unsigned long long lo = m << s;
    const unsigned long long hi = s ? (m >> (64 - s)) : 0ULL;
    const bool neg = (u >> 63) != 0ULL;
    const unsigned long long piece[3] = {lo & 0xffffffffULL, lo >> 32, hi};
    unsigned long long* limb =
        acc + ((long long)(blockIdx.x % SIMSPLIT_MD_SUM_REPLICAS) * SIMSPLIT_MD_SUM_QUANTITIES
               + quantity) * SIMSPLIT_MD_SUM_LIMBS + (b >> 5);
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        if (piece[k]) atomicAdd(limb + k, neg ? 0ULL - piece[k] : piece[k]);
    }
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
