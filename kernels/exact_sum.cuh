// Exact sums of doubles on the device (MD thermo, forces on bodies).
//
// The CPU sums with math.fsum (correctly rounded), which no split or thread count changes. The
// device gets the same bits by adding every value exactly: a double is m * 2^(b - 1074) with
// m < 2^53 and 0 <= b < 2047, so m shifted by b mod 32 spans three 32-bit limbs of a
// fixed-point number whose lowest bit is 2^-1074. Each piece (< 2^32) is added with an integer
// atomic into its limb (64 bits: fewer than 2^31 values cannot overflow one). The host adds the
// limbs as one integer and rounds it once (simsplit/numerics/exact.py): the correctly rounded
// sum, fsum's. Integer additions commute, so the order of the atomics does not matter.
#ifndef SIMSPLIT_EXACT_SUM_CUH
#define SIMSPLIT_EXACT_SUM_CUH

// Add the double with bits u into the limbs of one sum (limb t weighs 2^(32 t - 1074));
// inf or nan set *nonfinite instead (the host then takes fsum's path and its errors).
__device__ __forceinline__ void exact_add(unsigned long long* limbs, unsigned long long u,
                                          int* nonfinite)
{
    const int ex = int((u >> 52) & 0x7ffULL);
    if (ex == 0x7ff) {
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
    unsigned long long* limb = limbs + (b >> 5);
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        if (piece[k]) atomicAdd(limb + k, neg ? 0ULL - piece[k] : piece[k]);
    }
}

#endif
