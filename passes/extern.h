/*===- extern.h - pt2-extern-blas's shared pieces (extern.c, epilogue.c) ----===*
 *
 * The elementwise epilogue that a library call can take over from the
 * kernel after it (buffers and strided views: buffers.h).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_EXTERN_H
#define PT2_PASSES_EXTERN_H

#include "../runtime/rt/pt2rt.h"
#include "buffers.h"

bool has_uses(MlirValue v);

/*--- epilogues (epilogue.c) ---------------------------------------------------*/

/* What a library call can take over from the elementwise kernel after it. */
typedef struct EpilogueRules {
    int max_addends; /* 0 to EPILOGUE_MAX_ADDENDS */
    bool activations; /* sigmoid, silu, gelu (erf and tanh forms) */
    /* addends as oneDNN's convolution takes them (result [N, O, OH, OW]): a
     * per-channel one as the first step (its bias), one of the whole shape
     * anywhere (its sum post-op); else an addend of any broadcast first */
    bool onednn;
    /* non-null: R is a half product's f32 accumulator and the consumer's
     * first step must round it to this type (its output's), which the call
     * then writes; the steps after it are on half values (an addend added as
     * truncf(extf(v) + extf(a)), taken in f32 before the one rounding) */
    MlirType round_to;
} EpilogueRules;

#define EPILOGUE_MAX_ADDENDS 2

/* A library call's result R (a fresh buffer) read elementwise by one
 * linalg.generic, the consumer, whose output the call can write instead;
 * the steps of the consumer's body that it can compute as well. */
typedef struct Epilogue {
    MlirOperation consumer;
    int result_input;   /* the consumer's input that reads R */
    MlirValue result_root; /* R */
    View out;           /* the consumer's output, over R's index space */
    int n_addends;
    View addends[EPILOGUE_MAX_ADDENDS]; /* over R's index space */
    int addend_inputs[EPILOGUE_MAX_ADDENDS];
    int n_steps;
    int steps[PT2RT_MAX_STEPS]; /* enum Pt2rtEpilogueStep */
    MlirValue computed;         /* the body value the call computes */
    OpList folded;              /* the body ops computing it */
} Epilogue;

/* The epilogue of the library call that will replace `op`, writing
 * `result` (a dense view of a fresh alloc that `fill` zeroes and nothing
 * else but op and the consumer touch) of element type `elem`; the call
 * reads the buffers `read_roots`.  False (nothing changed) if none; if
 * one, the consumer's output is available before op (its alloc moved up
 * if it was made after op), and commit_epilogue must follow. */
bool find_epilogue(MlirOperation op, MlirOperation fill, const View *result, MlirType elem, const MlirValue *read_roots,
                   int n_reads, const EpilogueRules *rules, Epilogue *e);
/* The steps as pt2rt's int64 program. */
int64_t epilogue_program(const Epilogue *e);
/* Once the call is built and op and fill are erased: the consumer runs in
 * place on its output, without the steps the call took; R goes. */
void commit_epilogue(Epilogue *e);

/*--- attention (extern.c; passes/gpu_attention.c) ---------------------------*/

/* The generic pt2-lower makes of a kept pt2.attention (lower_nn.c: loops
 * (batch..., i, e, j, d), operands q, k, v, mask, out, a placeholder body)
 * as a library call's operands: strided views [batch..., rows, cols] of
 * q (i, d), k (j, d), v (j, e), mask (i, j) with 0 strides where it
 * broadcasts, out (i, e), a q, k or v that is a fresh copy of a permuted
 * view (heads split from a projection) read from the copy's source. */
typedef struct AttentionCall {
    View operands[5];
    int rank;
    MlirType elem, mask_elem;
    double scale;
    bool causal, zero_masked_rows, no_mask; /* no_mask: the mask is a constant 0 */
    OpList dead; /* the copies read through: erased once the call replaces the generic */
} AttentionCall;

bool attention_is_marked(MlirOperation op);
/* false (nothing to free) on IR pt2-lower did not make. */
bool attention_call_of(MlirOperation op, AttentionCall *a);

/*--- grouped products (extern.c; passes/gpu_grouped_mm.c) -------------------*/

/* The generic pt2-lower makes of a kept pt2.grouped_mm (lower_grouped_mm.c:
 * loops (s, n, g, k), operands a, b, offs, out, a placeholder body) as a
 * library call's operands: strided views a [S, K], b [G, K, N], offs [G],
 * out [S, N], an a or b that is a fresh copy of a view (transformers' experts
 * pass b as [G, N, K] transposed) read from the copy's source. */
typedef struct GroupedMmCall {
    View operands[4];
    MlirType elem, offs_elem; /* f32, bf16 or f16; i32 or i64 */
    OpList dead;              /* the copies read through: erased once the call replaces the generic */
} GroupedMmCall;

bool grouped_mm_is_marked(MlirOperation op);
/* false (nothing to free) on IR pt2-lower did not make. */
bool grouped_mm_call_of(MlirOperation op, GroupedMmCall *call);

#endif /* PT2_PASSES_EXTERN_H */
