/*===- lower_aten.c - pt2-lower: pt2.aten becomes a call into libpt2rt -----===*
 *
 * A pt2.aten (dialects/aten.c) runs PyTorch's kernels on the kernel's
 * buffers, so it is lowered with the contractions (after elementwise fusion,
 * which must not fuse into it) to
 *
 *   %b0 = bufferization.to_buffer %x0 read_only : tensor<5x5xf32> to memref<5x5xf32, strided<[?, ?], offset: ?>>
 *   %r0 = memref.alloc() : memref<5x3xf32>
 *   func.call @pt2_aten_0(%b0, ..., %r0, ...)
 *   %y0 = bufferization.to_tensor %r0 restrict writable : memref<5x3xf32> to tensor<5x3xf32>
 *
 * and a private function per op that writes each buffer's pointer, offset,
 * sizes and strides into a table and calls libpt2rt with it and the op's
 * description, a constant global "<operand types>|<result types>|<program>":
 *
 *   func.func private @pt2_aten_0(%a0: memref<...>, %r0: memref<5x3xf32>) {
 *     <extract_strided_metadata, extract_aligned_pointer_as_index, stores into %table>
 *     call @pt2rt_aten_call(%desc, %table) : (memref<*xi8>, memref<*xindex>) -> ()
 *   }
 *
 * The buffers are the call's operands, so that the passes after
 * bufferization (memory planning, deallocation) see them used there.
 * Operand types are the op's own: pt2-lower records them in the op's
 * `pt2.operand_types` before it makes unsigned types signless
 * (pt2_aten_note_operand_types).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "lower.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"


static void put_type(Pt2Text *t, const Pt2TensorType *ty) {
    pt2_text_printf(t, "%s[", pt2DTypeMlirName(ty->dtype));
    for (int i = 0; i < ty->rank; ++i) pt2_text_printf(t, "%s%lld", i ? "," : "", (long long)ty->sizes[i]);
    pt2_text_printf(t, "]");
}

static const char *string_attr(MlirOperation op, const char *name, size_t *len);

/* "f32[5,5]{5,1};..." : each operand's type, and the strides the calls were recorded with (operand_strides). */
void pt2_aten_note_operand_types(MlirOperation op) {
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.operand_types")))) return;
    size_t n_strides = 0;
    const char *strides = string_attr(op, "operand_strides", &n_strides), *end = strides ? strides + n_strides : NULL;
    Pt2Text t = {0};
    pt2_text_printf(&t, "%s", "");
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        Pt2TensorType ty = value_tensor_type(mlirOperationGetOperand(op, i));
        if (i) pt2_text_printf(&t, ";");
        put_type(&t, &ty);
        if (strides && strides < end) { /* this operand's "5,1" of "5,1;1,5" */
            const char *semi = memchr(strides, ';', (size_t)(end - strides));
            size_t n = semi ? (size_t)(semi - strides) : (size_t)(end - strides);
            pt2_text_printf(&t, "{%.*s}", (int)n, strides);
            strides += n + (semi ? 1 : 0);
        }
    }
    MlirContext ctx = mlirOperationGetContext(op);
    MlirAttribute noted = mlirStringAttrGet(ctx, mlirStringRefCreate(t.data, t.len));
    mlirOperationSetAttributeByName(op, sref("pt2.operand_types"), noted);
    free(t.data);
}

/* "memref<5x5xf32" for tensor<5x5xf32> (the layout and '>' left to the caller). */
static void put_memref_head(Pt2Text *t, MlirType tensor) {
    pt2_text_printf(t, "memref<");
    intptr_t rank = mlirShapedTypeGetRank(tensor);
    for (intptr_t i = 0; i < rank; ++i) pt2_text_printf(t, "%lldx", (long long)mlirShapedTypeGetDimSize(tensor, i));
    char elem[32];
    Pt2TextBuf b = {elem, sizeof elem, 0};
    elem[0] = 0;
    mlirTypePrint(mlirShapedTypeGetElementType(tensor), pt2_textbuf_append, &b);
    pt2_text_printf(t, "%s", elem);
}

/* A buffer's type: an operand's with any strides and offset (the tensor's buffer as bufferization left
 * it), a result's the identity layout (its own alloc). */
static void put_buffer_type(Pt2Text *t, MlirType tensor, bool operand) {
    put_memref_head(t, tensor);
    intptr_t rank = mlirShapedTypeGetRank(tensor);
    if (operand) {
        pt2_text_printf(t, ", strided<[");
        for (intptr_t i = 0; i < rank; ++i) pt2_text_printf(t, "%s?", i ? ", " : "");
        pt2_text_printf(t, "], offset: ?>");
    }
    pt2_text_printf(t, ">");
}

static const char *string_attr(MlirOperation op, const char *name, size_t *len) {
    MlirAttribute a = mlirOperationGetAttributeByName(op, sref(name));
    if (mlirAttributeIsNull(a) || !mlirAttributeIsAString(a)) return NULL;
    MlirStringRef s = mlirStringAttrGetValue(a);
    *len = s.length;
    return s.data;
}

/* The module-level global holding the description and the function that calls libpt2rt with it. */
static void emit_callee(MlirOperation module, const char *name, const char *desc, size_t desc_len, int n_in, int n_out,
                        MlirType *types) {
    Pt2Text t = {0};
    pt2_text_printf(&t, "module {\nfunc.func private @pt2rt_aten_call(memref<*xi8>, memref<*xindex>) "
                        "attributes {llvm.emit_c_interface}\n");
    pt2_text_printf(&t, "memref.global \"private\" constant @%s_desc : memref<%zuxi8> = dense<\"0x", name, desc_len);
    for (size_t i = 0; i < desc_len; ++i) pt2_text_printf(&t, "%02X", (unsigned char)desc[i]);
    pt2_text_printf(&t, "\">\nfunc.func private @%s(", name);
    int table = 0;
    for (int i = 0; i < n_in + n_out; ++i) {
        pt2_text_printf(&t, "%s%%b%d: ", i ? ", " : "", i);
        put_buffer_type(&t, types[i], i < n_in);
        table += 2 + 2 * (int)mlirShapedTypeGetRank(types[i]);
    }
    pt2_text_printf(&t, ") {\n  %%desc = memref.get_global @%s_desc : memref<%zuxi8>\n", name, desc_len);
    pt2_text_printf(&t, "  %%table = memref.alloca() : memref<%dxindex>\n", table ? table : 1);
    int slot = 0;
    for (int i = 0; i < n_in + n_out; ++i) {
        int rank = (int)mlirShapedTypeGetRank(types[i]);
        Pt2Text ty = {0};
        put_buffer_type(&ty, types[i], i < n_in);
        char elem[32];
        Pt2TextBuf eb = {elem, sizeof elem, 0};
        elem[0] = 0;
        mlirTypePrint(mlirShapedTypeGetElementType(types[i]), pt2_textbuf_append, &eb);
        pt2_text_printf(&t, "  %%base%d, %%offset%d", i, i);
        for (int d = 0; d < rank; ++d) pt2_text_printf(&t, ", %%size%d_%d", i, d);
        for (int d = 0; d < rank; ++d) pt2_text_printf(&t, ", %%stride%d_%d", i, d);
        pt2_text_printf(&t, " = memref.extract_strided_metadata %%b%d : %s -> memref<%s>, index", i, ty.data, elem);
        for (int d = 0; d < 2 * rank; ++d) pt2_text_printf(&t, ", index");
        pt2_text_printf(&t, "\n  %%pointer%d = memref.extract_aligned_pointer_as_index %%b%d : %s -> index\n", i, i,
                        ty.data);
        free(ty.data);
        const char *fields[2] = {"pointer", "offset"};
        for (int f = 0; f < 2; ++f) {
            pt2_text_printf(&t, "  %%c%d = arith.constant %d : index\n"
                                "  memref.store %%%s%d, %%table[%%c%d] : memref<%dxindex>\n", slot, slot,
                fields[f], i, slot, table);
            slot++;
        }
        for (int f = 0; f < 2; ++f) {
            for (int d = 0; d < rank; ++d) {
                pt2_text_printf(&t, "  %%c%d = arith.constant %d : index\n"
                                    "  memref.store %%%s%d_%d, %%table[%%c%d] : memref<%dxindex>\n", slot,
                    slot, f ? "stride" : "size", i, d, slot, table);
                slot++;
            }
        }
    }
    pt2_text_printf(&t, "  %%d = memref.cast %%desc : memref<%zuxi8> to memref<*xi8>\n", desc_len);
    pt2_text_printf(&t, "  %%t = memref.cast %%table : memref<%dxindex> to memref<*xindex>\n", table ? table : 1);
    pt2_text_printf(&t, "  func.call @pt2rt_aten_call(%%d, %%t) : (memref<*xi8>, memref<*xindex>) -> ()\n"
                        "  return\n}\n}\n");
    MlirContext ctx = mlirOperationGetContext(module);
    MlirModule snippet = mlirModuleCreateParse(ctx, mlirStringRefCreate(t.data, t.len));
    if (mlirModuleIsNull(snippet)) {
        fprintf(stderr, "pt2 internal error: cannot parse pt2.aten's callee:\n%s\n", t.data);
        abort();
    }
    free(t.data);
    MlirBlock from = mlirModuleGetBody(snippet), to = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    bool declared = module_has_symbol(module, "pt2rt_aten_call");
    for (MlirOperation o = mlirBlockGetFirstOperation(from), next; !mlirOperationIsNull(o); o = next) {
        next = mlirOperationGetNextInBlock(o);
        MlirAttribute sym = mlirOperationGetAttributeByName(o, sref("sym_name"));
        bool redeclared = declared && mlirStringRefEqual(mlirStringAttrGetValue(sym), sref("pt2rt_aten_call"));
        if (redeclared) continue; /* the module declares it already */
        mlirOperationRemoveFromParent(o);
        mlirBlockInsertOwnedOperation(to, 0, o);
    }
    mlirModuleDestroy(snippet);
}

int lower_aten(MlirOperation op) {
    MlirOperation module = enclosing_module(op);
    size_t types_len, program_len, results_len;
    const char *types = string_attr(op, "pt2.operand_types", &types_len);
    const char *program = string_attr(op, "program", &program_len), *results = string_attr(op, "results", &results_len);
    if (mlirOperationIsNull(module) || !types || !program || !results) {
        op_error(op, "pt2-lower: 'pt2.aten' needs 'program', 'results' and its pt2.operand_types");
        return -1;
    }
    char name[32];
    for (int k = 0;; ++k) {
        snprintf(name, sizeof name, "pt2_aten_%d", k);
        if (!module_has_symbol(module, name)) break;
    }
    /* results nothing reads get no buffer: "_" in the description (a call's auxiliary results, which a
     * meta kernel may size otherwise than the CPU's) */
    int n_in = (int)mlirOperationGetNumOperands(op), n_results = (int)mlirOperationGetNumResults(op), n_out = 0;
    MlirType tys[PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS];
    int buffer_of[PT2_ATEN_MAX_RESULTS];
    for (int i = 0; i < n_in; ++i) tys[i] = mlirValueGetType(mlirOperationGetOperand(op, i));
    Pt2Text used = {0};
    pt2_text_printf(&used, "%s", "");
    const char *rt = results, *rt_end = results + results_len;
    for (int j = 0; j < n_results; ++j) {
        MlirValue r = mlirOperationGetResult(op, j);
        const char *semi = memchr(rt, ';', (size_t)(rt_end - rt));
        size_t n = semi ? (size_t)(semi - rt) : (size_t)(rt_end - rt);
        bool read = !mlirOpOperandIsNull(mlirValueGetFirstUse(r));
        pt2_text_printf(&used, "%s%.*s", j ? ";" : "", read ? (int)n : 1, read ? rt : "_");
        rt += n + (semi ? 1 : 0);
        buffer_of[j] = read ? n_out : -1;
        if (read) tys[n_in + n_out++] = mlirValueGetType(r);
    }
    Pt2Text desc = {0};
    pt2_text_printf(&desc, "%.*s|%s|%.*s", (int)types_len, types, used.data, (int)program_len, program);
    emit_callee(module, name, desc.data, desc.len, n_in, n_out, tys);
    free(desc.data);
    free(used.data);

    Builder b = builder_before(op);
    MlirValue args[PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS], results_v[PT2_ATEN_MAX_RESULTS];
    MlirType arg_types[PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS];
    for (int i = 0; i < n_in + n_out; ++i) {
        Pt2Text ty = {0};
        put_buffer_type(&ty, tys[i], i < n_in);
        arg_types[i] = parse_type(b.ctx, ty.data);
        free(ty.data);
        if (i < n_in) {
            MlirNamedAttribute ro = named_attr(b.ctx, "read_only", mlirUnitAttrGet(b.ctx));
            MlirValue x = mlirOperationGetOperand(op, i);
            MlirOperation to_buffer = build_op(&b, "bufferization.to_buffer", 1, &x, 1, &arg_types[i], 1, &ro);
            args[i] = mlirOperationGetResult(to_buffer, 0);
        } else {
            MlirNamedAttribute align = named_attr(b.ctx, "alignment", parse_attr(b.ctx, "64 : i64"));
            args[i] = mlirOperationGetResult(build_op(&b, "memref.alloc", 0, NULL, 1, &arg_types[i], 1, &align), 0);
        }
    }
    MlirNamedAttribute callee = named_attr(b.ctx, "callee", mlirFlatSymbolRefAttrGet(b.ctx, sref(name)));
    build_op(&b, "func.call", n_in + n_out, args, 0, NULL, 1, &callee);
    for (int j = 0; j < n_results; ++j) {
        MlirNamedAttribute flags[2] = {named_attr(b.ctx, "restrict", mlirUnitAttrGet(b.ctx)),
                                       named_attr(b.ctx, "writable", mlirUnitAttrGet(b.ctx))};
        MlirType ty = mlirValueGetType(mlirOperationGetResult(op, j));
        int k = buffer_of[j];
        if (k < 0) {
            results_v[j] = build_empty(&b, ty);
        } else {
            MlirOperation to_tensor = build_op(&b, "bufferization.to_tensor", 1, &args[n_in + k], 1, &ty, 2, flags);
            results_v[j] = mlirOperationGetResult(to_tensor, 0);
        }
    }
    replace_op(op, n_results, results_v);
    return 0;
}
