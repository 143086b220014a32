/*===- grouped_mm.c - libpt2rt: a mixture of experts' grouped product -----===*
 *
 *   pt2rt_grouped_mm_<type>_<offs type>(a, b, offs, out)   (from pt2-extern-blas)
 *     a [S, K], b [G, K, N], offs [G] (i32 or i64), out [S, N]; f32, bf16 or f16
 *   ─▶ row s of out is a[s] @ b[g(s)], g(s) = #{g : offs[g] <= s} (the group
 *      whose rows are offs[g-1] <= s < offs[g] where offs is nondecreasing),
 *      0 where g(s) = G (rows from the last offset on): pt2.grouped_mm's
 *      definition (dialects/catalog.def), the decomposition's too
 *   ─▶ each run of rows in one group one product through the matmul entries
 *      (pt2rt.c's f32 GEMMs over the OpenMP team, gemm_half.c's oneDNN
 *      matmul writing the half result rounded once), every operand a
 *      strided view of the caller's buffers
 *
 * Why: the decomposition (a gathered contraction: each row reads b[g(s)] in
 * one loop nest) is generated loops, not a GEMM: `[512, 256] x [8, 256,
 * 512]` took 2.2 ms in f32 and bf16 on the development machine where
 * eager's per-group GEMMs took 0.55 ms.
 *===----------------------------------------------------------------------===*/
#include "pt2rt.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* A rank-2 descriptor as MLIR lays one out (pt2rt.h). */
typedef struct Desc2 {
    void *allocated, *aligned;
    int64_t offset, sizes[2], strides[2];
} Desc2;

/* A [rows, cols] view at data (strides in elements) as an unranked memref over d. */
static Pt2rtUnrankedMemRef view2(Desc2 *d, char *data, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    *d = (Desc2){data, data, 0, {rows, cols}, {rs, cs}};
    return (Pt2rtUnrankedMemRef){2, d};
}

typedef enum Type { T_F32, T_BF16, T_F16 } Type;

static int64_t offset_at(const char *offs, int64_t stride, int64_t g, size_t size) {
    const char *p = offs + g * stride * (int64_t)size;
    if (size == 4) {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The group of row s: the offsets at most s, counted. */
static int64_t group_of(const char *offs, int64_t stride, int64_t groups, size_t size, int64_t s) {
    int64_t g = 0;
    for (int64_t i = 0; i < groups; ++i) g += offset_at(offs, stride, i, size) <= s;
    return g;
}

static void grouped_mm(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *offs,
                       const Pt2rtUnrankedMemRef *out, Type type, size_t offs_size) {
    size_t es = type == T_F32 ? 4 : 2;
    if (a->rank != 2 || b->rank != 3 || offs->rank != 1 || out->rank != 2) pt2rt_fatal("grouped_mm operands of unexpected ranks");
    char *da, *db, *doffs, *dout;
    int64_t sa[2], ta[2], sb[3], tb[3], so[1], to[1], sc[2], tc[2];
    pt2rt_read_descriptor(a, es, &da, sa, ta);
    pt2rt_read_descriptor(b, es, &db, sb, tb);
    pt2rt_read_descriptor(offs, offs_size, &doffs, so, to);
    pt2rt_read_descriptor(out, es, &dout, sc, tc);
    int64_t S = sa[0], K = sa[1], G = sb[0], N = sb[2];
    if (sb[1] != K || so[0] != G || sc[0] != S || sc[1] != N) {
        pt2rt_fatal("grouped_mm operand shapes disagree (a compiler bug: see passes/extern.c)");
    }
    /* nondecreasing offsets: the runs are the groups' row ranges; else a row's group counted */
    bool sorted = true;
    for (int64_t g = 1; g < G && sorted; ++g) sorted = offset_at(doffs, to[0], g - 1, offs_size) <= offset_at(doffs, to[0], g, offs_size);
    for (int64_t s0 = 0; s0 < S;) {
        int64_t g = group_of(doffs, to[0], G, offs_size, s0), s1 = s0 + 1;
        if (sorted) {
            int64_t end = g < G ? offset_at(doffs, to[0], g, offs_size) : S;
            s1 = end < s1 ? s1 : end > S ? S : end;
        } else {
            while (s1 < S && group_of(doffs, to[0], G, offs_size, s1) == g) ++s1;
        }
        char *rows_out = dout + s0 * tc[0] * (int64_t)es;
        if (g == G || K == 0) { /* past the last group (or an empty sum): 0 */
            for (int64_t s = 0; s < s1 - s0; ++s) {
                for (int64_t n = 0; n < N; ++n) memset(rows_out + (s * tc[0] + n * tc[1]) * (int64_t)es, 0, es);
            }
        } else if (N > 0) {
            Desc2 dva, dvb, dvc;
            Pt2rtUnrankedMemRef va = view2(&dva, da + s0 * ta[0] * (int64_t)es, s1 - s0, K, ta[0], ta[1]);
            Pt2rtUnrankedMemRef vb = view2(&dvb, db + g * tb[0] * (int64_t)es, K, N, tb[1], tb[2]);
            Pt2rtUnrankedMemRef vc = view2(&dvc, rows_out, s1 - s0, N, tc[0], tc[1]);
            if (type == T_F32) {
                pt2rt_matmul_f32(&va, &vb, &vc, 0);
            } else if (type == T_BF16) {
                pt2rt_matmul_round_bf16(&va, &vb, &vc);
            } else {
                pt2rt_matmul_round_f16(&va, &vb, &vc);
            }
        }
        s0 = s1;
    }
}

#define GROUPED_MM(type_name, type, offs_name, offs_size)                                                                   \
    void pt2rt_grouped_mm_##type_name##_##offs_name(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,            \
                                                     const Pt2rtUnrankedMemRef *offs, const Pt2rtUnrankedMemRef *out) {    \
        grouped_mm(a, b, offs, out, type, offs_size);                                                                      \
    }

GROUPED_MM(f32, T_F32, i32, 4)
GROUPED_MM(f32, T_F32, i64, 8)
GROUPED_MM(bf16, T_BF16, i32, 4)
GROUPED_MM(bf16, T_BF16, i64, 8)
GROUPED_MM(f16, T_F16, i32, 4)
GROUPED_MM(f16, T_F16, i64, 8)
