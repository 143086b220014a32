/*===- pt2-run.c - compile a pt2 function and run it on inputs -------------===*
 *
 *   pt2-run FILE.mlir [--func NAME] [--seed N] [--input a.npy ...]
 *           [--out DIR] [--bench N] [--dump-ir DIR] [--print]
 * Inputs are random (floats uniform in [-1, 1), ints in [0, 10), bools
 * 50/50; reproducible with --seed) unless given as .npy files in argument
 * order.  Prints each output's shape, dtype and checksums; --out writes
 * out0.npy, out1.npy, ...; --bench N prints the median of N timed runs.
 *===----------------------------------------------------------------------===*/
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pt2.h"
#include "tool_util.h"

/*--- element access --------------------------------------------------------*/

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal */
            int e = -1;
            do {
                mant <<= 1;
                ++e;
            } while (!(mant & 0x400));
            bits = sign | (uint32_t)(112 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 112) << 23 | mant << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift;
        if ((mant >> (shift - 1)) & 1) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | (uint32_t)exp << 10 | mant >> 13;
    if (mant & 0x1000) h++; /* round half up (ties are rare in random data) */
    return (uint16_t)h;
}

static double get_elem(const void *p, Pt2DType dt, int64_t i) {
    switch (dt) {
    case PT2_F32: return ((const float *)p)[i];
    case PT2_F64: return ((const double *)p)[i];
    case PT2_F16: return half_to_float(((const uint16_t *)p)[i]);
    case PT2_BF16: {
        uint32_t bits = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case PT2_I64: return (double)((const int64_t *)p)[i];
    case PT2_I32: return ((const int32_t *)p)[i];
    case PT2_I8: return ((const int8_t *)p)[i];
    default: return ((const uint8_t *)p)[i] != 0;
    }
}

static void set_elem(void *p, Pt2DType dt, int64_t i, double v) {
    switch (dt) {
    case PT2_F32: ((float *)p)[i] = (float)v; break;
    case PT2_F64: ((double *)p)[i] = v; break;
    case PT2_F16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
    case PT2_BF16: {
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
        break;
    }
    case PT2_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case PT2_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case PT2_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

/*--- .npy ------------------------------------------------------------------*/

static const char *npy_descr(Pt2DType dt) {
    switch (dt) {
    case PT2_F32: return "<f4";
    case PT2_F64: return "<f8";
    case PT2_F16: return "<f2";
    case PT2_I64: return "<i8";
    case PT2_I32: return "<i4";
    case PT2_I8: return "|i1";
    case PT2_BOOL: return "|b1";
    default: return NULL; /* bfloat16 has no numpy type: written as float32 */
    }
}

static int write_npy(const char *path, const void *data, Pt2DType dt, int rank, const int64_t *sizes) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int64_t numel = 1;
    for (int i = 0; i < rank; ++i) numel *= sizes[i];
    const char *descr = npy_descr(dt);
    char header[512], shape[256] = "";
    size_t sl = 0;
    for (int i = 0; i < rank; ++i) sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%lld,%s", (long long)sizes[i], i + 1 < rank ? " " : "");
    if (rank > 1 && sl > 0) shape[sl - 1] = 0; /* (a, b) rather than (a, b,) */
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr ? descr : "<f4", shape);
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    uint16_t hlen = (uint16_t)(hl + pad + 1);
    fwrite(&hlen, 2, 1, f);
    fwrite(header, 1, (size_t)hl, f);
    for (int i = 0; i < pad; ++i) fputc(' ', f);
    fputc('\n', f);
    if (descr) {
        fwrite(data, pt2DTypeSize(dt), (size_t)numel, f);
    } else {
        for (int64_t i = 0; i < numel; ++i) {
            float v = (float)get_elem(data, dt, i);
            fwrite(&v, 4, 1, f);
        }
    }
    fclose(f);
    return 0;
}

/* Reads a C-order .npy whose dtype and shape match exactly. */
static void *read_npy(const char *path, Pt2DType dt, int rank, const int64_t *sizes, char *err, size_t errlen) {
    size_t len;
    char *buf = tool_read_file(path, &len);
    if (!buf || len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
        snprintf(err, errlen, "%s is not a .npy file", path);
        free(buf);
        return NULL;
    }
    size_t hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8, off = 10;
    if (buf[6] >= 2) {
        hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8 | (size_t)(unsigned char)buf[10] << 16 |
               (size_t)(unsigned char)buf[11] << 24;
        off = 12;
    }
    char *header = strndup(buf + off, hlen);
    const char *want = npy_descr(dt);
    int64_t numel = 1;
    for (int i = 0; i < rank; ++i) numel *= sizes[i];
    void *data = NULL;
    if (!want || !strstr(header, want) || strstr(header, "'fortran_order': True")) {
        snprintf(err, errlen, "%s: expected dtype %s in C order (header %s)", path, pt2DTypeName(dt), header);
    } else if (len - off - hlen != (size_t)numel * pt2DTypeSize(dt)) {
        snprintf(err, errlen, "%s: expected %lld elements of %s", path, (long long)numel, pt2DTypeName(dt));
    } else {
        data = malloc((size_t)numel * pt2DTypeSize(dt) + 1);
        memcpy(data, buf + off + hlen, (size_t)numel * pt2DTypeSize(dt));
    }
    free(header);
    free(buf);
    return data;
}

/*--- main ------------------------------------------------------------------*/

static uint64_t rng_state;
static double rng_uniform(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *file = NULL, *func = NULL, *out_dir = NULL, *inputs[64];
    int n_given = 0, bench = 0, print = 0;
    Pt2CompileOptions opts;
    pt2CompileOptionsInit(&opts);
    rng_state = 42;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--func") == 0 && i + 1 < argc) func = argv[++i];
        else if (strcmp(a, "--seed") == 0 && i + 1 < argc) rng_state = strtoull(argv[++i], NULL, 10);
        else if (strcmp(a, "--input") == 0 && i + 1 < argc && n_given < 64) inputs[n_given++] = argv[++i];
        else if (strcmp(a, "--out") == 0 && i + 1 < argc) out_dir = argv[++i];
        else if (strcmp(a, "--bench") == 0 && i + 1 < argc) bench = atoi(argv[++i]);
        else if (strcmp(a, "--dump-ir") == 0 && i + 1 < argc) opts.dump_dir = argv[++i];
        else if (strcmp(a, "--print") == 0) print = 1;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("usage: pt2-run FILE.mlir [--func NAME] [--seed N] [--input a.npy ...] [--out DIR] [--bench N] "
                   "[--dump-ir DIR] [--print]\n");
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "pt2-run: unknown option '%s' (see --help)\n", a);
            return 1;
        } else file = a;
    }
    if (!file) {
        fprintf(stderr, "pt2-run: no input file (see --help)\n");
        return 1;
    }
    char *text = tool_read_file(file, NULL);
    if (!text) {
        fprintf(stderr, "pt2-run: cannot read '%s'\n", file);
        return 1;
    }
    Pt2Context *ctx = pt2ContextCreate();
    Pt2Kernel *k = ctx ? pt2CompileText(ctx, text, file, func, &opts) : NULL;
    free(text);
    if (!k) {
        fprintf(stderr, "%s\n", pt2GetLastError());
        return 1;
    }
    int n_in = pt2KernelNumInputs(k), n_out = pt2KernelNumOutputs(k), n = n_in + n_out;
    if (n_given && n_given != n_in) {
        fprintf(stderr, "pt2-run: the function takes %d inputs, %d .npy files given\n", n_in, n_given);
        return 1;
    }
    void **ptrs = calloc((size_t)n, sizeof *ptrs);
    Pt2DType *dts = calloc((size_t)n, sizeof *dts);
    int64_t(*sizes)[PT2_MAX_RANK] = calloc((size_t)n, sizeof *sizes);
    int *ranks = calloc((size_t)n, sizeof *ranks);
    for (int i = 0; i < n; ++i) {
        ranks[i] = pt2KernelArgType(k, i, &dts[i], sizes[i]);
        int64_t numel = 1;
        for (int d = 0; d < ranks[i]; ++d) numel *= sizes[i][d];
        if (i < n_in && n_given) {
            char err[512];
            ptrs[i] = read_npy(inputs[i], dts[i], ranks[i], sizes[i], err, sizeof err);
            if (!ptrs[i]) {
                fprintf(stderr, "pt2-run: %s\n", err);
                return 1;
            }
            continue;
        }
        ptrs[i] = calloc((size_t)(numel ? numel : 1), pt2DTypeSize(dts[i]));
        if (i < n_in) {
            for (int64_t e = 0; e < numel; ++e) {
                double u = rng_uniform();
                double v = dts[i] == PT2_BOOL ? (u < 0.5) : (dts[i] == PT2_I64 || dts[i] == PT2_I32 || dts[i] == PT2_I8) ? floor(u * 10) : 2 * u - 1;
                set_elem(ptrs[i], dts[i], e, v);
            }
        }
    }
    pt2KernelRunPointers(k, ptrs);
    printf("compiled in %.3f s%s\n", pt2KernelCompileSeconds(k), pt2KernelFromCache(k) ? " (from cache)" : "");
    for (int i = n_in; i < n; ++i) {
        int64_t numel = 1;
        printf("output %d: shape [", i - n_in);
        for (int d = 0; d < ranks[i]; ++d) {
            printf("%s%lld", d ? ", " : "", (long long)sizes[i][d]);
            numel *= sizes[i][d];
        }
        double sum = 0, abs_sum = 0;
        for (int64_t e = 0; e < numel; ++e) {
            double v = get_elem(ptrs[i], dts[i], e);
            sum += v;
            abs_sum += fabs(v);
        }
        printf("] dtype %s sum %.6g abs_sum %.6g\n", pt2DTypeName(dts[i]), sum, abs_sum);
        if (print) {
            for (int64_t e = 0; e < numel && e < 64; ++e) printf("%s%.6g", e ? " " : "  ", get_elem(ptrs[i], dts[i], e));
            printf("%s\n", numel > 64 ? " ..." : "");
        }
        if (out_dir) {
            mkdir(out_dir, 0755);
            char path[4096];
            snprintf(path, sizeof path, "%s/out%d.npy", out_dir, i - n_in);
            if (write_npy(path, ptrs[i], dts[i], ranks[i], sizes[i]) != 0) {
                fprintf(stderr, "pt2-run: cannot write %s\n", path);
                return 1;
            }
        }
    }
    if (bench > 0) {
        double *t = malloc(sizeof(double) * (size_t)bench);
        for (int r = 0; r < 3; ++r) pt2KernelRunPointers(k, ptrs);
        for (int r = 0; r < bench; ++r) {
            double t0 = now();
            pt2KernelRunPointers(k, ptrs);
            t[r] = now() - t0;
        }
        qsort(t, (size_t)bench, sizeof *t, cmp_double);
        printf("median %.3f ms over %d runs\n", 1e3 * t[bench / 2], bench);
        free(t);
    }
    for (int i = 0; i < n; ++i) free(ptrs[i]);
    free(ptrs);
    free(dts);
    free(sizes);
    free(ranks);
    pt2KernelDestroy(k);
    pt2ContextDestroy(ctx);
    return 0;
}
