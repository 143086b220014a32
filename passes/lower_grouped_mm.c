/*===- lower_grouped_mm.c - pt2-lower: grouped_mm kept for a library -------===*
 *
 * pt2.grouped_mm(a [S, K], b [G, K, N], offs [G]) that a decomposition
 * kept (the CPU pipeline's pt2-decompose-keep-attention, the GPU's
 * -keep-attention-gpu) becomes a linalg.generic over loops (s, n, g, k)
 * with maps
 *     a (s, k), b (g, k, n), offs (g), out (s, n)
 * marked `pt2.grouped_mm`: the maps tell the rewrite each buffer's role,
 * the mark that the body is a placeholder, which pt2-extern-blas replaces
 * by a call of pt2rt_grouped_mm_* (runtime/rt/grouped_mm.c: a GEMM per
 * group of rows) and pt2-gpu-extern-grouped-mm by the launch plan's call
 * of PyTorch's grouped GEMM (passes/gpu_grouped_mm.c), or fails the
 * pipeline.  It is lowered with the contractions, after elementwise
 * fusion, so nothing is fused into it.  Elsewhere (PT2_DISABLE=blas, GPU
 * types PyTorch's kernel does not take) pt2-decompose makes it a gathered
 * contraction.
 *===----------------------------------------------------------------------===*/
#include "lower.h"

/* Not the grouped product: a body that reads every operand (canonicalization
 * drops inputs a body does not read) and types right. */
static void placeholder_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    (void)user;
    MlirType t = mlirValueGetType(args[3]);
    MlirValue offset = build_unary(b, "arith.sitofp", args[2], t);
    yields[0] = build_binary(b, "arith.addf", args[3], build_binary(b, "arith.mulf", build_binary(b, "arith.mulf", args[0], args[1]), offset));
}

int lower_grouped_mm(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue in[3], result = mlirOperationGetResult(op, 0);
    for (int i = 0; i < 3; ++i) in[i] = mlirOperationGetOperand(op, i);
    const char *maps[4] = {"(s, n, g, k) -> (s, k)", "(s, n, g, k) -> (g, k, n)",
                           "(s, n, g, k) -> (g)", "(s, n, g, k) -> (s, n)"};
    MlirValue init = build_empty(&b, mlirValueGetType(result));
    MlirOperation generic = build_generic(&b, 3, in, 1, &init, maps, "pprr", placeholder_body, NULL);
    mlirOperationSetAttributeByName(generic, sref("pt2.grouped_mm"), mlirUnitAttrGet(b.ctx));
    MlirValue out = mlirOperationGetResult(generic, 0);
    replace_op(op, 1, &out);
    return 0;
}
