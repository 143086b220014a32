/*===- pt2-run.c - compile a pt2 function and run it on inputs -------------===*
 *
 *   pt2-run FILE.mlir [--func NAME] [--seed N] [--input a.npy ...]
 *           [--out DIR] [--bench N] [--dump-ir DIR] [--print]
 * Inputs are random (floats uniform in [-1, 1), ints in [0, 10), bools
 * 50/50; reproducible with --seed) unless given as .npy files in argument
 * order.  Prints each output's shape, dtype and checksums; --out writes
 * out0.npy, out1.npy, ...; --bench N prints the median of N timed runs.
 * Exit status: 0 on success, 1 on any error (bad IR gets pt2-opt's
 * file:line:col diagnostics, never a crash).
 *===----------------------------------------------------------------------===*/
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tool_util.h" /* before pt2.h: the MLIR C API enables pt2.h's MLIR-level part */

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
    case PT2_I16: return ((const int16_t *)p)[i];
    case PT2_U8: return ((const uint8_t *)p)[i];
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
    case PT2_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case PT2_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

/*--- .npy ------------------------------------------------------------------*/

/* numpy's name of a pt2 dtype in little-endian C order; bfloat16 has none
 * and travels as float32. */
static const char *npy_descr(Pt2DType dt) {
    switch (dt) {
    case PT2_F32: return "<f4";
    case PT2_F64: return "<f8";
    case PT2_F16: return "<f2";
    case PT2_I64: return "<i8";
    case PT2_I32: return "<i4";
    case PT2_I8: return "|i1";
    case PT2_I16: return "<i2";
    case PT2_U8: return "|u1";
    case PT2_BOOL: return "|b1";
    case PT2_BF16: return "<f4";
    default: return NULL;
    }
}

static int64_t numel_of(int rank, const int64_t *sizes) {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= sizes[i];
    return n;
}

static void format_shape(int rank, const int64_t *sizes, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < rank && n < cap; ++i) {
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? ", " : "", (long long)sizes[i]);
    }
    if (n < cap) snprintf(out + n, cap - n, "%s)", rank == 1 ? "," : "");
}

static int write_npy(const char *path, const void *data, Pt2DType dt, int rank, const int64_t *sizes) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int64_t numel = numel_of(rank, sizes);
    char header[512], shape[256];
    format_shape(rank, sizes, shape, sizeof shape);
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", npy_descr(dt), shape);
    /* magic, version, header length, header, padding and '\n' fill a multiple of 64 bytes */
    int pad = (64 - (10 + hl + 1) % 64) % 64;
    uint16_t hlen = (uint16_t)(hl + pad + 1);
    unsigned char len_le[2] = {(unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fwrite(len_le, 1, 2, f);
    fwrite(header, 1, (size_t)hl, f);
    for (int i = 0; i < pad; ++i) fputc(' ', f);
    fputc('\n', f);
    if (dt != PT2_BF16) {
        fwrite(data, pt2DTypeSize(dt), (size_t)numel, f);
    } else {
        for (int64_t i = 0; i < numel; ++i) {
            float v = (float)get_elem(data, dt, i);
            fwrite(&v, 4, 1, f);
        }
    }
    bool failed = ferror(f) != 0;
    return fclose(f) != 0 || failed ? -1 : 0;
}

/* The quoted value of 'key' in a .npy header dict, or NULL. */
static const char *npy_field(const char *header, const char *key) {
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s':", key);
    const char *p = strstr(header, quoted);
    if (!p) return NULL;
    p += strlen(quoted);
    while (*p == ' ') ++p;
    return p;
}

/* Parses the 'shape': (a, b, ...) tuple; returns the rank or -1. */
static int npy_shape(const char *header, int64_t *sizes) {
    const char *p = npy_field(header, "shape");
    if (!p || *p != '(') return -1;
    ++p;
    int rank = 0;
    for (;;) {
        while (*p == ' ' || *p == ',') ++p;
        if (*p == ')') return rank;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || rank == PT2_MAX_RANK) return -1;
        sizes[rank++] = v;
        p = end;
    }
}

/* Reads a .npy file holding exactly a dt[sizes] array (C order) into
 * malloc'ed contiguous data, or returns NULL after writing why to err. */
static void *read_npy(const char *path, Pt2DType dt, int rank, const int64_t *sizes, char *err, size_t errlen) {
    size_t len = 0;
    char *buf = tool_read_file(path, &len);
    if (!buf) {
        snprintf(err, errlen, "%s: error: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    void *data = NULL;
    char *header = NULL;
    const unsigned char *u = (const unsigned char *)buf;
    size_t hlen = 0, off = 0;
    if (len >= 10 && memcmp(buf, "\x93NUMPY", 6) == 0 && u[6] == 1) {
        hlen = (size_t)u[8] | (size_t)u[9] << 8;
        off = 10;
    } else if (len >= 12 && memcmp(buf, "\x93NUMPY", 6) == 0 && (u[6] == 2 || u[6] == 3)) {
        hlen = (size_t)u[8] | (size_t)u[9] << 8 | (size_t)u[10] << 16 | (size_t)u[11] << 24;
        off = 12;
    } else {
        snprintf(err, errlen, "%s: error: not a .npy file (numpy.save writes them)", path);
        goto done;
    }
    if (hlen > len - off) {
        snprintf(err, errlen, "%s: error: truncated .npy header", path);
        goto done;
    }
    header = strndup(buf + off, hlen);
    /* numpy pads the header with spaces and a newline: not worth quoting */
    for (size_t n = strlen(header); n > 0 && (header[n - 1] == ' ' || header[n - 1] == '\n'); --n) header[n - 1] = 0;
    const char *descr = npy_field(header, "descr"), *order = npy_field(header, "fortran_order");
    const char *want = npy_descr(dt);
    int64_t got_sizes[PT2_MAX_RANK];
    int got_rank = npy_shape(header, got_sizes);
    char want_shape[256], got_shape[256];
    format_shape(rank, sizes, want_shape, sizeof want_shape);
    if (got_rank >= 0) format_shape(got_rank, got_sizes, got_shape, sizeof got_shape);
    size_t elem = dt == PT2_BF16 ? 4 : pt2DTypeSize(dt), bytes = (size_t)numel_of(rank, sizes) * elem;
    if (!descr || descr[0] != '\'' || strncmp(descr + 1, want, strlen(want)) != 0 || descr[1 + strlen(want)] != '\'') {
        snprintf(err, errlen, "%s: error: the function's input is %s, which needs numpy dtype '%s' (header: %s)", path,
                 pt2DTypeName(dt), want, header);
    } else if (!order || strncmp(order, "False", 5) != 0) {
        snprintf(err, errlen, "%s: error: the array is in Fortran order; save a C-contiguous array (numpy.ascontiguousarray)", path);
    } else if (got_rank < 0) {
        snprintf(err, errlen, "%s: error: cannot read the shape in the .npy header: %s", path, header);
    } else if (got_rank != rank || memcmp(got_sizes, sizes, sizeof *sizes * (size_t)rank) != 0) {
        snprintf(err, errlen, "%s: error: the function's input has shape %s, the array %s", path, want_shape, got_shape);
    } else if (len - off - hlen != bytes) {
        snprintf(err, errlen, "%s: error: %zu bytes of data for a %s array of %s, which needs %zu", path, len - off - hlen,
                 want_shape, pt2DTypeName(dt), bytes);
    } else if (!(data = malloc(bytes ? bytes : 1))) {
        snprintf(err, errlen, "%s: error: out of memory", path);
    } else if (dt == PT2_BF16) {
        for (int64_t i = 0; i < numel_of(rank, sizes); ++i) {
            float v;
            memcpy(&v, buf + off + hlen + 4 * i, 4);
            set_elem(data, dt, i, v);
        }
    } else {
        memcpy(data, buf + off + hlen, bytes);
    }
done:
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

static void fill_random(void *p, Pt2DType dt, int64_t numel) {
    bool is_int = pt2DTypeIsFloating(dt) == 0 && dt != PT2_BOOL;
    for (int64_t e = 0; e < numel; ++e) {
        double u = rng_uniform();
        set_elem(p, dt, e, dt == PT2_BOOL ? (u < 0.5) : is_int ? floor(u * 10) : 2 * u - 1);
    }
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

#define MAX_INPUTS 256

typedef struct Args {
    const char *file, *func, *out_dir, *inputs[MAX_INPUTS];
    int n_given, bench, print;
    uint64_t seed;
    Pt2CompileOptions opts;
} Args;

static void usage(FILE *f) {
    fprintf(f, "usage: pt2-run FILE.mlir [--func NAME] [--seed N] [--input a.npy ...] [--out DIR] [--bench N] "
               "[--dump-ir DIR] [--print]\n"
               "  --func NAME     the function to run (default: the first with a body)\n"
               "  --seed N        seed of the random inputs (default 42)\n"
               "  --input FILE    a .npy file per input, in argument order (default: random inputs)\n"
               "  --out DIR       write the outputs as DIR/out0.npy, out1.npy, ...\n"
               "  --bench N       time N runs and print the median\n"
               "  --dump-ir DIR   write the IR after every pipeline stage to DIR (compiles even on a cache hit)\n"
               "  --print         print the first 64 values of each output\n");
}

/* Parses an integer in [lo, hi] or returns false. */
static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Returns 0, 1 for --help (done), -1 after a message. */
static int parse_args(int argc, char **argv, Args *a) {
    for (int i = 1; i < argc; ++i) {
        const char *s = argv[i];
        bool has_value = i + 1 < argc;
        long long v;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(s, "--print") == 0) {
            a->print = 1;
        } else if (!has_value && (strcmp(s, "--func") == 0 || strcmp(s, "--seed") == 0 || strcmp(s, "--input") == 0 ||
                                  strcmp(s, "--out") == 0 || strcmp(s, "--bench") == 0 || strcmp(s, "--dump-ir") == 0)) {
            fprintf(stderr, "pt2-run: error: %s needs a value (see --help)\n", s);
            return -1;
        } else if (strcmp(s, "--func") == 0) {
            a->func = argv[++i];
        } else if (strcmp(s, "--seed") == 0) {
            if (!parse_int(argv[++i], 0, INT64_MAX, &v)) {
                fprintf(stderr, "pt2-run: error: --seed needs a non-negative integer, not '%s'\n", argv[i]);
                return -1;
            }
            a->seed = (uint64_t)v;
        } else if (strcmp(s, "--input") == 0) {
            if (a->n_given == MAX_INPUTS) {
                fprintf(stderr, "pt2-run: error: more than %d --input files\n", MAX_INPUTS);
                return -1;
            }
            a->inputs[a->n_given++] = argv[++i];
        } else if (strcmp(s, "--out") == 0) {
            a->out_dir = argv[++i];
        } else if (strcmp(s, "--bench") == 0) {
            if (!parse_int(argv[++i], 1, 100000000, &v)) {
                fprintf(stderr, "pt2-run: error: --bench needs a positive number of runs, not '%s'\n", argv[i]);
                return -1;
            }
            a->bench = (int)v;
        } else if (strcmp(s, "--dump-ir") == 0) {
            a->opts.dump_dir = argv[++i];
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "pt2-run: error: unknown option '%s' (see --help)\n", s);
            return -1;
        } else if (a->file) {
            fprintf(stderr, "pt2-run: error: more than one input file ('%s' and '%s')\n", a->file, s);
            return -1;
        } else {
            a->file = s;
        }
    }
    if (!a->file) {
        fprintf(stderr, "pt2-run: error: no input file (see --help)\n");
        return -1;
    }
    return 0;
}

/* Parses and verifies the module with the tools' diagnostics (file:line:col,
 * notes, op names), as pt2-opt would; pt2CompileText then parses it again
 * and reports only what comes later (signature, pipeline).  0 if valid. */
static int check_module(Pt2Context *ctx, const char *text, const char *name) {
    MlirContext mctx = pt2ContextGetMlir(ctx);
    ToolDiagState st = {name, text, 0, NULL};
    MlirDiagnosticHandlerID h = mlirContextAttachDiagnosticHandler(mctx, tool_handle_diagnostic, &st, NULL);
    MlirOperation module = pt2ParseModule(mctx, text, name);
    bool ok = !mlirOperationIsNull(module) && pt2VerifyOp(module) == 0;
    if (!mlirOperationIsNull(module)) mlirOperationDestroy(module);
    mlirContextDetachDiagnosticHandler(mctx, h);
    if (!ok && st.errors == 0) fprintf(stderr, "%s: error: the module does not parse\n", name);
    return ok ? 0 : -1;
}

/* The kernel's error: diagnostics already read "file:line:col: error: ...";
 * anything else (linking, the cache) gets the tool's name. */
static void print_compile_error(void) {
    const char *msg = pt2GetLastError();
    if (strstr(msg, ": error: ")) {
        fprintf(stderr, "%s\n", msg);
    } else {
        fprintf(stderr, "pt2-run: error: %s\n", msg[0] ? msg : "compilation failed");
    }
}

static void print_output(int index, const void *data, Pt2DType dt, int rank, const int64_t *sizes, bool values) {
    int64_t numel = numel_of(rank, sizes);
    printf("output %d: shape [", index);
    for (int d = 0; d < rank; ++d) printf("%s%lld", d ? ", " : "", (long long)sizes[d]);
    double sum = 0, abs_sum = 0;
    for (int64_t e = 0; e < numel; ++e) {
        double v = get_elem(data, dt, e);
        sum += v;
        abs_sum += fabs(v);
    }
    printf("] dtype %s sum %.6g abs_sum %.6g\n", pt2DTypeName(dt), sum, abs_sum);
    if (values) {
        for (int64_t e = 0; e < numel && e < 64; ++e) printf("%s%.6g", e ? " " : "  ", get_elem(data, dt, e));
        printf("%s\n", numel > 64 ? " ..." : "");
    }
}

/* Runs the kernel once; an error it reports (an index out of range) is
 * printed, with where the values came from.  0 or -1. */
static int run_once(Pt2Kernel *k, void **ptrs, const Args *a) {
    if (pt2KernelRunPointers(k, ptrs) == 0) return 0;
    fprintf(stderr, "pt2-run: error: %s%s\n", pt2GetLastError(),
            a->n_given ? "" : " (random integer inputs lie in [0, 10): give index tensors with --input)");
    return -1;
}

static int bench(Pt2Kernel *k, void **ptrs, const Args *a) {
    double *t = malloc(sizeof(double) * (size_t)a->bench);
    if (!t) {
        fprintf(stderr, "pt2-run: error: out of memory\n");
        return -1;
    }
    int runs = a->bench;
    /* warm caches and the thread pool (run_once reported any error already) */
    for (int r = 0; r < 3; ++r) pt2KernelRunPointers(k, ptrs);
    for (int r = 0; r < runs; ++r) {
        double t0 = now();
        pt2KernelRunPointers(k, ptrs);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    printf("median %.3f ms over %d runs\n", 1e3 * t[runs / 2], runs);
    free(t);
    return 0;
}

int main(int argc, char **argv) {
    Args a;
    memset(&a, 0, sizeof a);
    a.seed = 42;
    pt2CompileOptionsInit(&a.opts);
    int parsed = parse_args(argc, argv, &a);
    if (parsed != 0) return parsed > 0 ? 0 : 1;
    rng_state = a.seed;
    int rc = 1, n = 0;
    Pt2Context *ctx = NULL;
    Pt2Kernel *k = NULL;
    void **ptrs = NULL;
    size_t len;
    char *text = tool_read_file(a.file, &len);
    if (!text) {
        fprintf(stderr, "pt2-run: error: cannot read '%s': %s\n", a.file, strerror(errno));
        return 1;
    }
    if (tool_check_no_nul(a.file, text, len) != 0) goto done;
    ctx = pt2ContextCreate();
    if (!ctx) {
        fprintf(stderr, "pt2-run: error: %s\n", pt2GetLastError());
        goto done;
    }
    if (check_module(ctx, text, a.file) != 0) goto done;
    k = pt2CompileText(ctx, text, a.file, a.func, &a.opts);
    if (!k) {
        print_compile_error();
        goto done;
    }
    int n_in = pt2KernelNumInputs(k), n_out = pt2KernelNumOutputs(k);
    n = n_in + n_out;
    if (a.n_given && a.n_given != n_in) {
        fprintf(stderr, "pt2-run: error: the function takes %d input%s, %d .npy file%s given\n", n_in, n_in == 1 ? "" : "s",
                a.n_given, a.n_given == 1 ? "" : "s");
        goto done;
    }
    ptrs = calloc((size_t)n, sizeof *ptrs);
    Pt2DType dts[2 * MAX_INPUTS];
    int64_t sizes[2 * MAX_INPUTS][PT2_MAX_RANK];
    int ranks[2 * MAX_INPUTS];
    if (!ptrs || n > 2 * MAX_INPUTS) {
        fprintf(stderr, "pt2-run: error: the function has %d arguments and results; pt2-run handles %d\n", n, 2 * MAX_INPUTS);
        goto done;
    }
    for (int i = 0; i < n; ++i) {
        ranks[i] = pt2KernelArgType(k, i, &dts[i], sizes[i]);
        if (i < n_in && a.n_given) {
            char err[1024];
            ptrs[i] = read_npy(a.inputs[i], dts[i], ranks[i], sizes[i], err, sizeof err);
            if (!ptrs[i]) {
                fprintf(stderr, "%s (input %d)\n", err, i);
                goto done;
            }
            continue;
        }
        /* the verifier bounds numel so that bytes fit in int64; size_t is as wide here */
        int64_t numel = numel_of(ranks[i], sizes[i]);
        ptrs[i] = calloc((size_t)(numel ? numel : 1), pt2DTypeSize(dts[i]));
        if (!ptrs[i]) {
            fprintf(stderr, "pt2-run: error: cannot allocate %lld bytes for %s %d\n", (long long)numel * (long long)pt2DTypeSize(dts[i]),
                    i < n_in ? "input" : "output", i < n_in ? i : i - n_in);
            goto done;
        }
        if (i < n_in) fill_random(ptrs[i], dts[i], numel);
    }
    if (run_once(k, ptrs, &a) != 0) goto done;
    printf("compiled in %.3f s%s\n", pt2KernelCompileSeconds(k), pt2KernelFromCache(k) ? " (from cache)" : "");
    if (a.out_dir && mkdir(a.out_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "pt2-run: error: cannot create %s: %s\n", a.out_dir, strerror(errno));
        goto done;
    }
    for (int i = n_in; i < n; ++i) {
        print_output(i - n_in, ptrs[i], dts[i], ranks[i], sizes[i], a.print);
        if (a.out_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/out%d.npy", a.out_dir, i - n_in);
            if (write_npy(path, ptrs[i], dts[i], ranks[i], sizes[i]) != 0) {
                fprintf(stderr, "pt2-run: error: cannot write %s: %s\n", path, strerror(errno));
                goto done;
            }
        }
    }
    if (a.bench > 0 && bench(k, ptrs, &a) != 0) goto done;
    rc = 0;
done:
    for (int i = 0; ptrs && i < n; ++i) free(ptrs[i]);
    free(ptrs);
    pt2KernelDestroy(k);
    pt2ContextDestroy(ctx);
    free(text);
    return rc;
}
