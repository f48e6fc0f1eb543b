/* Element-wise reductions for every dtype: native types directly, the 16- and 8-bit floats
 * through float (each pairwise step rounds back, as the reference's and gloo's CPU paths do). */
#include <math.h>
#include <string.h>

#include "pg_internal.h"

/* --- small floats --- */

static float bf16_to_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);         /* to nearest even */
    return (uint16_t)(u >> 16);
}

/* A float with ebits of exponent and mbits of mantissa (IEEE layout, sign on top). */
struct minifloat {
    int ebits, mbits, bias;
    int finite_only; /* e4m3fn: no infinity; all-ones exponent and mantissa is NaN */
};
static const struct minifloat F16 = {5, 10, 15, 0}, E4M3 = {4, 3, 7, 1}, E5M2 = {5, 2, 15, 0};

static float mini_to_f(uint32_t v, const struct minifloat *m) {
    uint32_t sign = v >> (m->ebits + m->mbits) & 1u;
    uint32_t e = (v >> m->mbits) & ((1u << m->ebits) - 1);
    uint32_t man = v & ((1u << m->mbits) - 1);
    uint32_t emax = (1u << m->ebits) - 1;
    float f;
    if (m->finite_only && e == emax && man == (1u << m->mbits) - 1)
        f = NAN;
    else if (!m->finite_only && e == emax)
        f = man ? NAN : INFINITY;
    else if (e == 0)
        f = ldexpf((float)man, 1 - m->bias - m->mbits);
    else
        f = ldexpf((float)(man | (1u << m->mbits)), (int)e - m->bias - m->mbits);
    return sign ? -f : f;
}

static uint32_t f_to_mini(float f, const struct minifloat *m) {
    uint32_t sign = signbit(f) ? 1u << (m->ebits + m->mbits) : 0;
    uint32_t emax = (1u << m->ebits) - 1, mmask = (1u << m->mbits) - 1;
    uint32_t nan =
        m->finite_only ? (emax << m->mbits) | mmask : (emax << m->mbits) | (1u << (m->mbits - 1));
    uint32_t inf = m->finite_only ? nan : emax << m->mbits;
    if (isnan(f))
        return sign | nan;
    float a = fabsf(f);
    if (isinf(a))
        return sign | inf;
    if (a == 0)
        return sign;
    int e2;
    frexpf(a, &e2);
    int E = e2 - 1; /* a = 1.x * 2^E */
    int emin = 1 - m->bias;
    if (E < emin)
        E = emin;
    float q = nearbyintf(ldexpf(a, m->mbits - E)); /* the mantissa with its implied bit */
    if (q >= ldexpf(1.0f, m->mbits + 1)) {
        q = ldexpf(q, -1);
        E++;
    }
    uint32_t qi = (uint32_t)q;
    if (qi < (1u << m->mbits))
        return sign | qi; /* subnormal */
    uint32_t ef = (uint32_t)(E + m->bias), man = qi & mmask;
    if (m->finite_only) {
        if (ef > emax || (ef == emax && man == mmask))
            return sign | nan;
    } else if (ef >= emax) {
        return sign | inf;
    }
    return sign | (ef << m->mbits) | man;
}

/* --- the ops --- */

int mc__pg_reduce_check(int dtype, int op) {
    if (!mc_pg_dtype_size(dtype) || op < MC_PG_SUM || op > MC_PG_MAX)
        return MC_ERR_INVALID_ARGUMENT;
    if (dtype >= MC_PG_FLOAT8_E4M3FNUZ)
        return MC_ERR_NOT_IMPLEMENTED;
    return 0;
}

#define OP_LOOP(T, EXPR)                                                                           \
    do {                                                                                           \
        T *a_ = acc;                                                                               \
        const T *b_ = in;                                                                          \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = a_[i], y = b_[i];                                                                \
            a_[i] = (T)(EXPR);                                                                     \
        }                                                                                          \
    } while (0)

#define NATIVE(T)                                                                                  \
    do {                                                                                           \
        switch (op) {                                                                              \
        case MC_PG_SUM:                                                                            \
        case MC_PG_AVG:                                                                            \
            OP_LOOP(T, x + y);                                                                     \
            break;                                                                                 \
        case MC_PG_PRODUCT:                                                                        \
            OP_LOOP(T, x *y);                                                                      \
            break;                                                                                 \
        case MC_PG_MIN:                                                                            \
            OP_LOOP(T, y < x ? y : x);                                                             \
            break;                                                                                 \
        default:                                                                                   \
            OP_LOOP(T, y > x ? y : x);                                                             \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* fmin/fmax would drop a NaN; torch's min/max propagate it, so these do too. */
static float fop(float x, float y, int op) {
    switch (op) {
    case MC_PG_SUM:
    case MC_PG_AVG:
        return x + y;
    case MC_PG_PRODUCT:
        return x * y;
    case MC_PG_MIN:
        return isnan(x) || isnan(y) ? NAN : (y < x ? y : x);
    default:
        return isnan(x) || isnan(y) ? NAN : (y > x ? y : x);
    }
}

#define FLOATISH(T, TO_F, FROM_F)                                                                  \
    do {                                                                                           \
        T *a_ = acc;                                                                               \
        const T *b_ = in;                                                                          \
        for (size_t i = 0; i < n; i++)                                                             \
            a_[i] = (T)FROM_F(fop(TO_F(a_[i]), TO_F(b_[i]), op));                                  \
    } while (0)

static float f16_in(uint16_t v) {
    return mini_to_f(v, &F16);
}
static uint16_t f16_out(float f) {
    return (uint16_t)f_to_mini(f, &F16);
}
static float e4m3_in(uint8_t v) {
    return mini_to_f(v, &E4M3);
}
static uint8_t e4m3_out(float f) {
    return (uint8_t)f_to_mini(f, &E4M3);
}
static float e5m2_in(uint8_t v) {
    return mini_to_f(v, &E5M2);
}
static uint8_t e5m2_out(float f) {
    return (uint8_t)f_to_mini(f, &E5M2);
}

void mc__pg_reduce_into(void *acc, const void *in, size_t n, int dtype, int op) {
    switch (dtype) {
    case MC_PG_INT8:
        NATIVE(int8_t);
        break;
    case MC_PG_UINT8:
        NATIVE(uint8_t);
        break;
    case MC_PG_INT16:
        NATIVE(int16_t);
        break;
    case MC_PG_UINT16:
        NATIVE(uint16_t);
        break;
    case MC_PG_INT32:
        NATIVE(int32_t);
        break;
    case MC_PG_UINT32:
        NATIVE(uint32_t);
        break;
    case MC_PG_INT64:
        NATIVE(int64_t);
        break;
    case MC_PG_UINT64:
        NATIVE(uint64_t);
        break;
    case MC_PG_FLOAT32:
        FLOATISH(float, (float), (float));
        break;
    case MC_PG_FLOAT64: {
        double *a_ = acc;
        const double *b_ = in;
        for (size_t i = 0; i < n; i++) {
            double x = a_[i], y = b_[i];
            switch (op) {
            case MC_PG_SUM:
            case MC_PG_AVG:
                a_[i] = x + y;
                break;
            case MC_PG_PRODUCT:
                a_[i] = x * y;
                break;
            case MC_PG_MIN:
                a_[i] = isnan(x) || isnan(y) ? NAN : (y < x ? y : x);
                break;
            default:
                a_[i] = isnan(x) || isnan(y) ? NAN : (y > x ? y : x);
                break;
            }
        }
        break;
    }
    case MC_PG_BOOL: {
        uint8_t *a_ = acc;
        const uint8_t *b_ = in;
        /* torch's bool sum and max are "or", product and min "and" */
        int is_or = op == MC_PG_SUM || op == MC_PG_AVG || op == MC_PG_MAX;
        for (size_t i = 0; i < n; i++)
            a_[i] = is_or ? (a_[i] || b_[i]) : (a_[i] && b_[i]);
        break;
    }
    case MC_PG_FLOAT16:
        FLOATISH(uint16_t, f16_in, f16_out);
        break;
    case MC_PG_BFLOAT16:
        FLOATISH(uint16_t, bf16_to_f, f_to_bf16);
        break;
    case MC_PG_FLOAT8_E4M3FN:
        FLOATISH(uint8_t, e4m3_in, e4m3_out);
        break;
    case MC_PG_FLOAT8_E5M2:
        FLOATISH(uint8_t, e5m2_in, e5m2_out);
        break;
    default:
        break;
    }
}

#define DIV_INT(T)                                                                                 \
    do {                                                                                           \
        T *a_ = acc;                                                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            a_[i] = (T)(a_[i] / (T)d);                                                             \
    } while (0)
#define DIV_FLOATISH(T, TO_F, FROM_F)                                                              \
    do {                                                                                           \
        T *a_ = acc;                                                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            a_[i] = (T)FROM_F(TO_F(a_[i]) / (float)d);                                             \
    } while (0)

void mc__pg_divide(void *acc, size_t n, int dtype, int d) {
    switch (dtype) {
    case MC_PG_INT8:
        DIV_INT(int8_t);
        break;
    case MC_PG_UINT8:
        DIV_INT(uint8_t);
        break;
    case MC_PG_INT16:
        DIV_INT(int16_t);
        break;
    case MC_PG_UINT16:
        DIV_INT(uint16_t);
        break;
    case MC_PG_INT32:
        DIV_INT(int32_t);
        break;
    case MC_PG_UINT32:
        DIV_INT(uint32_t);
        break;
    case MC_PG_INT64:
        DIV_INT(int64_t);
        break;
    case MC_PG_UINT64:
        DIV_INT(uint64_t);
        break;
    case MC_PG_FLOAT32:
        DIV_FLOATISH(float, (float), (float));
        break;
    case MC_PG_FLOAT64: {
        double *a_ = acc;
        for (size_t i = 0; i < n; i++)
            a_[i] /= (double)d;
        break;
    }
    case MC_PG_FLOAT16:
        DIV_FLOATISH(uint16_t, f16_in, f16_out);
        break;
    case MC_PG_BFLOAT16:
        DIV_FLOATISH(uint16_t, bf16_to_f, f_to_bf16);
        break;
    case MC_PG_FLOAT8_E4M3FN:
        DIV_FLOATISH(uint8_t, e4m3_in, e4m3_out);
        break;
    case MC_PG_FLOAT8_E5M2:
        DIV_FLOATISH(uint8_t, e5m2_in, e5m2_out);
        break;
    default:
        break; /* bool: avg is "or", nothing to divide */
    }
}
