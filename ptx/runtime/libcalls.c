/* Every function LLVM may lower JIT-compiled kernel code to a call of (half/bfloat conversions, 128-bit
   integer builtins, libm, memcpy...), in one table the JIT registers by name: nothing a kernel object
   needs is left to whatever libgcc_s or compiler-rt the process happens to have.
   Part of the runtime library (build.py); Python reads ptx_rt_libcalls (ptx/runtime/__init__.py). */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The helpers carry their own names: exported as __truncsfbf2 & co. with RTLD_GLOBAL they would
   interpose on the same builtins of every library loaded after the runtime. */
#define LC(name) ptx_lc_##name

typedef __int128 ti_int;
typedef unsigned __int128 tu_int;

/* ------------------------------------------------------------------ half / bfloat conversions */

/* LLVM passes and returns half and bfloat in the low 16 bits of an FP register (xmm0 on x86-64,
   h0 = the low half of s0 on AArch64): a float parameter or result carries those 16 bits unchanged,
   and this file never does float arithmetic on them (no -ffast-math, no conversion: moves only). */
static uint16_t carried(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)u;
}

static float carrier(uint16_t h) {
    uint32_t u = h;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static uint64_t f64_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static float f32_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Narrow an IEEE binary value (sig_bits fraction bits, exp_bits exponent bits, in the low bits of a)
   to one with dsig/dexp bits, rounding to nearest even, with subnormals, overflow to infinity, and a
   NaN kept a NaN of the same sign with the quiet bit set and the top of its payload (what F16C and
   AVX-512 conversions produce, and one of the results LLVM's NaN rules allow). */
static uint32_t narrow(uint64_t a, int sig_bits, int exp_bits, int dsig, int dexp) {
    const int src_bits = 1 + exp_bits + sig_bits;
    const uint64_t sig_mask = (1ull << sig_bits) - 1;
    const uint64_t abs_mask = (src_bits == 64 ? ~0ull : (1ull << src_bits) - 1) >> 1;
    const uint64_t inf = (uint64_t)((1u << exp_bits) - 1) << sig_bits;
    const int bias = (1 << (exp_bits - 1)) - 1, dbias = (1 << (dexp - 1)) - 1;
    const int dinf_exp = (1 << dexp) - 1;
    const int drop = sig_bits - dsig;
    const uint64_t round_mask = (1ull << drop) - 1, halfway = 1ull << (drop - 1);
    const uint32_t sign = (uint32_t)((a >> (src_bits - 1)) & 1) << (dsig + dexp);
    const uint64_t abs = a & abs_mask;
    const int e = (int)(abs >> sig_bits);
    uint64_t r;

    if (abs > inf) {
        r = ((uint64_t)dinf_exp << dsig) | (1ull << (dsig - 1)) | ((abs & sig_mask) >> drop);
        return sign | (uint32_t)r;
    }
    if (abs == inf || e - bias > dbias)
        return sign | ((uint32_t)dinf_exp << dsig);
    uint64_t sig;
    if (e - bias >= 1 - dbias) {                            /* normal in the destination */
        sig = (abs & sig_mask) | ((uint64_t)(e - bias + dbias) << sig_bits);
    } else {                                                /* subnormal (or zero) there */
        const uint64_t full = (abs & sig_mask) | (e ? 1ull << sig_bits : 0);
        const int shift = (1 - dbias) - (e ? e - bias : 1 - bias);
        if (shift > sig_bits + 1)
            return sign;                                    /* below half the least subnormal */
        sig = (full >> shift) | ((full & ((1ull << shift) - 1)) != 0);
    }
    /* the exponent field sits above the fraction, so a carry out of the rounding bumps it (up to
       infinity) as it should */
    r = sig >> drop;
    const uint64_t rest = sig & round_mask;
    if (rest > halfway || (rest == halfway && (r & 1)))
        r++;
    return sign | (uint32_t)r;
}

/* Exact widening of a 16-bit format to float (NaN: quiet bit set, payload kept, sign kept). */
static uint32_t widen16(uint16_t h, int sig_bits, int exp_bits) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31;
    const int bias = (1 << (exp_bits - 1)) - 1;
    const uint32_t sig = h & ((1u << sig_bits) - 1);
    const int e = (h >> sig_bits) & ((1 << exp_bits) - 1);
    const int up = 23 - sig_bits;
    if (e == (1 << exp_bits) - 1)
        return sign | 0x7F800000u | (sig << up) | (sig ? 0x00400000u : 0);
    if (e)
        return sign | ((uint32_t)(e - bias + 127) << 23) | (sig << up);
    if (!sig)
        return sign;
    if (bias == 127)                                        /* bfloat: float's own subnormals */
        return sign | (sig << up);
    int lead = 31 - __builtin_clz(sig);                     /* value = sig * 2^(1 - bias - sig_bits) */
    return sign | ((uint32_t)(lead + 1 - bias - sig_bits + 127) << 23) | ((sig << (23 - lead)) & 0x7FFFFFu);
}

float LC(extendhfsf2)(float h) { return f32_of(widen16(carried(h), 10, 5)); }
double LC(extendhfdf2)(float h) { return (double)f32_of(widen16(carried(h), 10, 5)); }
float LC(extendbfsf2)(float b) { return f32_of(widen16(carried(b), 7, 8)); }
float LC(truncsfhf2)(float x) { return carrier((uint16_t)narrow(f32_bits(x), 23, 8, 10, 5)); }
float LC(truncdfhf2)(double x) { return carrier((uint16_t)narrow(f64_bits(x), 52, 11, 10, 5)); }
float LC(truncsfbf2)(float x) { return carrier((uint16_t)narrow(f32_bits(x), 23, 8, 7, 8)); }
float LC(truncdfbf2)(double x) { return carrier((uint16_t)narrow(f64_bits(x), 52, 11, 7, 8)); }
/* the older names pass half as an integer */
float LC(gnu_h2f_ieee)(uint16_t h) { return f32_of(widen16(h, 10, 5)); }
uint16_t LC(gnu_f2h_ieee)(float x) { return (uint16_t)narrow(f32_bits(x), 23, 8, 10, 5); }

/* ------------------------------------------------------------------ 128-bit integers */

static int clz128(tu_int x) {
    uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
    return hi ? __builtin_clzll(hi) : lo ? 64 + __builtin_clzll(lo) : 128;
}

/* Shift-and-subtract from the top bit that can be set: no 128-bit divide of the C compiler's (which
   would be a libgcc call itself). Division by zero gives all ones and leaves the dividend as the
   remainder instead of a SIGFPE in a runtime worker. */
static tu_int udivmod128(tu_int n, tu_int d, tu_int *rem) {
    if (d == 0) {
        if (rem) *rem = n;
        return ~(tu_int)0;
    }
    if ((n >> 64) == 0 && (d >> 64) == 0) {
        if (rem) *rem = (uint64_t)n % (uint64_t)d;
        return (uint64_t)n / (uint64_t)d;
    }
    tu_int q = 0;
    if (d <= n) {
        int shift = clz128(d) - clz128(n);
        d <<= shift;
        for (int i = 0; i <= shift; i++) {
            q <<= 1;
            if (n >= d) {
                n -= d;
                q |= 1;
            }
            d >>= 1;
        }
    }
    if (rem) *rem = n;
    return q;
}

static tu_int uabs128(ti_int a) { return a < 0 ? -(tu_int)a : (tu_int)a; }

tu_int LC(udivti3)(tu_int a, tu_int b) { return udivmod128(a, b, NULL); }
tu_int LC(umodti3)(tu_int a, tu_int b) { tu_int r; udivmod128(a, b, &r); return r; }
tu_int LC(udivmodti4)(tu_int a, tu_int b, tu_int *rem) { return udivmod128(a, b, rem); }

ti_int LC(divti3)(ti_int a, ti_int b) {
    tu_int q = udivmod128(uabs128(a), uabs128(b), NULL);
    return (ti_int)(((a < 0) != (b < 0)) ? -q : q);
}

ti_int LC(modti3)(ti_int a, ti_int b) {
    tu_int r;
    udivmod128(uabs128(a), uabs128(b), &r);
    return (ti_int)(a < 0 ? -r : r);
}

ti_int LC(divmodti4)(ti_int a, ti_int b, ti_int *rem) {
    ti_int q = LC(divti3)(a, b);
    *rem = (ti_int)((tu_int)a - (tu_int)q * (tu_int)b);
    return q;
}

ti_int LC(multi3)(ti_int a, ti_int b) { return (ti_int)((tu_int)a * (tu_int)b); }

/* By hand: clang turns __builtin_mul_overflow on __int128 into a call of __muloti4 itself. */
ti_int LC(muloti4)(ti_int a, ti_int b, int *overflow) {
    tu_int ua = uabs128(a), ub = uabs128(b);
    uint64_t a1 = (uint64_t)(ua >> 64), a0 = (uint64_t)ua, b1 = (uint64_t)(ub >> 64), b0 = (uint64_t)ub;
    int big = 0;
    tu_int mag = 0;
    if (a1 && b1) {
        big = 1;
    } else {
        tu_int cross = (tu_int)a1 * b0 + (tu_int)a0 * b1;   /* one of the two terms is zero */
        tu_int low = (tu_int)a0 * b0;
        if (cross >> 64) {
            big = 1;
        } else {
            mag = low + (cross << 64);
            big = mag < low;
        }
    }
    const int neg = (a < 0) != (b < 0) && ua && ub;
    const tu_int limit = (tu_int)1 << 127;                   /* |min| for a negative product */
    *overflow = big || (neg ? mag > limit : mag >= limit);
    return (ti_int)((tu_int)a * (tu_int)b);
}

ti_int LC(ashlti3)(ti_int a, int b) { return (ti_int)((tu_int)a << b); }
ti_int LC(ashrti3)(ti_int a, int b) { return a >> b; }
ti_int LC(lshrti3)(ti_int a, int b) { return (ti_int)((tu_int)a >> b); }

/* bit counts by hand: the __builtin_ forms are libgcc calls on CPUs without the instructions */
static int pop64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}

static int clz64(uint64_t x) {
    int n = 0;
    for (int s = 32; s; s >>= 1)
        if (!(x >> (64 - s))) {
            n += s;
            x <<= s;
        }
    return x ? n : 64;
}

static int ctz64(uint64_t x) { return x ? 63 - clz64(x & -x) : 64; }

int LC(popcountsi2)(int32_t a) { return pop64((uint32_t)a); }
int LC(popcountdi2)(int64_t a) { return pop64((uint64_t)a); }
int LC(popcountti2)(ti_int a) { return pop64((uint64_t)a) + pop64((uint64_t)((tu_int)a >> 64)); }
int LC(paritysi2)(int32_t a) { return pop64((uint32_t)a) & 1; }
int LC(paritydi2)(int64_t a) { return pop64((uint64_t)a) & 1; }
int LC(parityti2)(ti_int a) { return LC(popcountti2)(a) & 1; }
/* zero arguments are undefined for clz/ctz: the width is what a caller guarding them expects */
int LC(clzsi2)(int32_t a) { return clz64((uint32_t)a) - 32; }
int LC(clzdi2)(int64_t a) { return clz64((uint64_t)a); }
int LC(clzti2)(ti_int a) {
    uint64_t hi = (uint64_t)((tu_int)a >> 64);
    return hi ? clz64(hi) : 64 + clz64((uint64_t)a);
}
int LC(ctzsi2)(int32_t a) { return a ? ctz64((uint32_t)a) : 32; }
int LC(ctzdi2)(int64_t a) { return ctz64((uint64_t)a); }
int LC(ctzti2)(ti_int a) {
    uint64_t lo = (uint64_t)a;
    return lo ? ctz64(lo) : 64 + ctz64((uint64_t)((tu_int)a >> 64));
}
uint32_t LC(bswapsi2)(uint32_t a) {
    return (a >> 24) | ((a >> 8) & 0xFF00u) | ((a << 8) & 0xFF0000u) | (a << 24);
}
uint64_t LC(bswapdi2)(uint64_t a) {
    return ((uint64_t)LC(bswapsi2)((uint32_t)a) << 32) | LC(bswapsi2)((uint32_t)(a >> 32));
}

/* ------------------------------------------------------------------ 128-bit integer <-> float */

/* The magnitude squeezed into 64 bits with everything shifted out kept as a sticky low bit: a later
   rounding to 53 or 24 bits then sees the exact value's rounding direction. Returns the shift. */
static int squeeze(tu_int m, uint64_t *top) {
    const int shift = (128 - clz128(m)) - 64;
    if (shift <= 0) {
        *top = (uint64_t)m;
        return 0;
    }
    *top = (uint64_t)(m >> shift) | ((m & (((tu_int)1 << shift) - 1)) != 0);
    return shift;
}

double LC(floatuntidf)(tu_int a) { uint64_t t; int s = squeeze(a, &t); return ldexp((double)t, s); }
float LC(floatuntisf)(tu_int a) { uint64_t t; int s = squeeze(a, &t); return ldexpf((float)t, s); }
double LC(floattidf)(ti_int a) { double r = LC(floatuntidf)(uabs128(a)); return a < 0 ? -r : r; }
float LC(floattisf)(ti_int a) { float r = LC(floatuntisf)(uabs128(a)); return a < 0 ? -r : r; }

/* Truncation toward zero of |x| < 2^128 (exponent e, 52-bit fraction f). */
static tu_int trunc_mag(uint64_t f, int e) {
    if (e < 0)
        return 0;
    tu_int m = f | (1ull << 52);
    return e >= 52 ? m << (e - 52) : m >> (52 - e);
}

/* Out of range saturates, NaN by its sign bit (as compiler-rt's __fixdfti does). */
ti_int LC(fixdfti)(double x) {
    uint64_t b = f64_bits(x);
    int e = (int)((b >> 52) & 0x7FF) - 1023, neg = (int)(b >> 63);
    if (e >= 127)
        return neg ? (ti_int)((tu_int)1 << 127) : (ti_int)(((tu_int)1 << 127) - 1);
    tu_int m = trunc_mag(b & ((1ull << 52) - 1), e);
    return neg ? -(ti_int)m : (ti_int)m;
}

tu_int LC(fixunsdfti)(double x) {
    uint64_t b = f64_bits(x);
    int e = (int)((b >> 52) & 0x7FF) - 1023;
    if (b >> 63)
        return 0;
    if (e >= 128)
        return ~(tu_int)0;
    return trunc_mag(b & ((1ull << 52) - 1), e);
}

ti_int LC(fixsfti)(float x) { return LC(fixdfti)((double)x); }
tu_int LC(fixunssfti)(float x) { return LC(fixunsdfti)((double)x); }

/* ------------------------------------------------------------------ powi */

/* compiler-rt's definition (repeated squaring in the argument's precision), which LLVM assumes */
float LC(powisf2)(float a, int b) {
    const int recip = b < 0;
    float r = 1;
    for (;;) {
        if (b & 1) r *= a;
        b /= 2;
        if (b == 0) break;
        a *= a;
    }
    return recip ? 1 / r : r;
}

double LC(powidf2)(double a, int b) {
    const int recip = b < 0;
    double r = 1;
    for (;;) {
        if (b & 1) r *= a;
        b /= 2;
        if (b == 0) break;
        a *= a;
    }
    return recip ? 1 / r : r;
}

/* ------------------------------------------------------------------ the table */

typedef struct ptx_libcall {
    const char *name;
    void *address;
} ptx_libcall;

#define OWN(name) {"__" #name, (void *)LC(name)}
#define LIBM(name) {#name, (void *)name}
#define LIBM2(name) LIBM(name), LIBM(name##f)

/* C99/glibc functions LLVM emits for its intrinsics and library-call simplifications (llvm.exp2,
   llvm.sin, sin+cos -> sincos, pow(10, x) -> exp10, ...) or that the code generator calls itself;
   the linker resolves them, so a name missing from this libm fails the runtime's build, not a kernel. */
const ptx_libcall ptx_rt_libcalls[] = {
    OWN(extendhfsf2), OWN(extendhfdf2), OWN(extendbfsf2), OWN(truncsfhf2), OWN(truncdfhf2),
    OWN(truncsfbf2), OWN(truncdfbf2), OWN(gnu_h2f_ieee), OWN(gnu_f2h_ieee),
    OWN(udivti3), OWN(umodti3), OWN(udivmodti4), OWN(divti3), OWN(modti3), OWN(divmodti4),
    OWN(multi3), OWN(muloti4), OWN(ashlti3), OWN(ashrti3), OWN(lshrti3),
    OWN(popcountsi2), OWN(popcountdi2), OWN(popcountti2), OWN(paritysi2), OWN(paritydi2),
    OWN(parityti2), OWN(clzsi2), OWN(clzdi2), OWN(clzti2), OWN(ctzsi2), OWN(ctzdi2), OWN(ctzti2),
    OWN(bswapsi2), OWN(bswapdi2),
    OWN(floatuntidf), OWN(floatuntisf), OWN(floattidf), OWN(floattisf),
    OWN(fixdfti), OWN(fixunsdfti), OWN(fixsfti), OWN(fixunssfti),
    OWN(powisf2), OWN(powidf2),
    LIBM2(sin), LIBM2(cos), LIBM2(tan), LIBM2(asin), LIBM2(acos), LIBM2(atan), LIBM2(atan2),
    LIBM2(sinh), LIBM2(cosh), LIBM2(tanh), LIBM2(asinh), LIBM2(acosh), LIBM2(atanh),
    LIBM2(exp), LIBM2(exp2), LIBM2(exp10), LIBM2(expm1), LIBM2(log), LIBM2(log2), LIBM2(log10),
    LIBM2(log1p), LIBM2(pow), LIBM2(sqrt), LIBM2(cbrt), LIBM2(hypot), LIBM2(fabs), LIBM2(copysign),
    LIBM2(floor), LIBM2(ceil), LIBM2(trunc), LIBM2(round), LIBM2(roundeven), LIBM2(rint),
    LIBM2(nearbyint), LIBM2(lrint), LIBM2(llrint), LIBM2(lround), LIBM2(llround),
    LIBM2(fmin), LIBM2(fmax), LIBM2(fmod), LIBM2(remainder), LIBM2(fma), LIBM2(ldexp),
    LIBM2(frexp), LIBM2(modf), LIBM2(scalbn), LIBM2(ilogb), LIBM2(logb), LIBM2(nextafter),
    LIBM2(erf), LIBM2(erfc), LIBM2(tgamma), LIBM2(lgamma), LIBM2(sincos),
    LIBM(memcpy), LIBM(memmove), LIBM(memset),
    {NULL, NULL},
};
