/*===- veclib.c - libm calls → glibc's libmvec vector variants (LLVM stage) =*
 *
 * pt2-math-to-libm turns transcendental math ops into calls of expf, erff,
 * tanhf, ... .  LLVM's loop vectorizer widens such a call only when it knows
 * a vector variant of the callee.  Its built-in table for glibc (the
 * -vector-library=LIBMVEC option, unreachable through the C API's pass
 * builder anyway) lists five functions; glibc 2.35+ ships vector versions of
 * all of them.  So this file states the variants itself, the way OpenMP's
 * `declare simd` does: each call gets the attribute
 *
 *   "vector-function-abi-variant"="_ZGV_LLVM_N8v_erff(_ZGVdN8v_erff),..."
 *
 * (vector function ABI names: ISA b = SSE, d = AVX2, e = AVX-512; N<lanes>;
 * one v per vector argument), the variants are declared in the module and
 * kept alive through @llvm.compiler.used until the vectorizer has run.
 * Only variants libmvec really exports, and ISAs the host has, are named;
 * the kernel links against libmvec (pt2_libmvec_path).
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "llvm-c/Core.h"
#include "veclib.h"

/* libm functions pt2-math-to-libm emits (the f64 names; f32 adds 'f'). */
static const char *const vector_functions[] = {
    "exp",  "exp2", "expm1", "log",   "log2",  "log10", "log1p", "sin",  "cos",  "tan",   "tanh", "sinh",
    "cosh", "asin", "acos",  "atan",  "asinh", "acosh", "atanh", "erf",  "erfc", "cbrt",  "atan2", "pow",
};
#define N_VECTOR_FUNCTIONS ((int)(sizeof vector_functions / sizeof vector_functions[0]))

static void *libmvec(void) {
    static void *handle;
    static bool tried;
    if (!tried) {
        handle = dlopen("libmvec.so.1", RTLD_LAZY | RTLD_LOCAL);
        tried = true;
    }
    return handle;
}

const char *pt2_libmvec_path(void) {
    static char path[4096];
    void *h = libmvec();
    struct link_map *map = NULL;
    if (!path[0] && h && dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) {
        snprintf(path, sizeof path, "%s", map->l_name);
    }
    return path[0] ? path : NULL;
}

/* Whether `name` (without the f32 suffix) is one of ours; *is_f32 tells. */
static bool known_function(const char *name, bool *is_f32) {
    size_t n = strlen(name);
    for (int i = 0; i < N_VECTOR_FUNCTIONS; ++i) {
        size_t m = strlen(vector_functions[i]);
        if (n == m && memcmp(name, vector_functions[i], m) == 0) {
            *is_f32 = false;
            return true;
        }
        if (n == m + 1 && memcmp(name, vector_functions[i], m) == 0 && name[m] == 'f') {
            *is_f32 = true;
            return true;
        }
    }
    return false;
}

static bool has_feature(const char *features, const char *f) {
    size_t n = strlen(f);
    for (const char *p = strstr(features, f); p; p = strstr(p + 1, f)) {
        if ((p == features || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    }
    return false;
}

static void add_function_attr(LLVMContextRef ctx, LLVMValueRef fn, const char *kind, uint64_t value) {
    unsigned id = LLVMGetEnumAttributeKindForName(kind, strlen(kind));
    if (id) LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, id, value));
}

int pt2_attach_vector_variants(LLVMModuleRef mod, const char *features) {
    void *lib = libmvec();
    if (!lib) return 0;
    static const struct {
        char isa;
        int bits;
        const char *feature;
    } isas[] = {{'b', 128, "+sse2"}, {'d', 256, "+avx2"}, {'e', 512, "+avx512f"}};
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMValueRef used[3 * N_VECTOR_FUNCTIONS * 2];
    int n_used = 0, n_mapped = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        size_t len;
        const char *name = LLVMGetValueName2(fn, &len);
        bool f32;
        if (!LLVMIsDeclaration(fn) || !known_function(name, &f32)) continue;
        LLVMTypeRef fn_type = LLVMGlobalGetValueType(fn);
        unsigned arity = LLVMCountParamTypes(fn_type);
        if (arity < 1 || arity > 2) continue;
        LLVMTypeRef elem = LLVMGetReturnType(fn_type);
        if (LLVMGetTypeKind(elem) != (f32 ? LLVMFloatTypeKind : LLVMDoubleTypeKind)) continue;
        /* libm without errno: nothing but the result (as -fno-math-errno) */
        add_function_attr(ctx, fn, "memory", 0);
        add_function_attr(ctx, fn, "nounwind", 0);
        add_function_attr(ctx, fn, "willreturn", 0);
        char variants[512] = "";
        size_t used_chars = 0;
        for (int i = 0; i < 3; ++i) {
            if (!has_feature(features, isas[i].feature)) continue;
            int lanes = isas[i].bits / (f32 ? 32 : 64);
            char vname[64];
            snprintf(vname, sizeof vname, "_ZGV%cN%d%s_%s", isas[i].isa, lanes, arity == 2 ? "vv" : "v", name);
            if (!dlsym(lib, vname)) continue;
            LLVMTypeRef vt = LLVMVectorType(elem, (unsigned)lanes);
            LLVMTypeRef params[2] = {vt, vt};
            LLVMValueRef vfn = LLVMGetNamedFunction(mod, vname);
            if (!vfn) vfn = LLVMAddFunction(mod, vname, LLVMFunctionType(vt, params, arity, 0));
            add_function_attr(ctx, vfn, "memory", 0);
            add_function_attr(ctx, vfn, "nounwind", 0);
            used[n_used++] = vfn;
            used_chars += (size_t)snprintf(variants + used_chars, sizeof variants - used_chars, "%s_ZGV_LLVM_N%d%s_%s(%s)",
                                           used_chars ? "," : "", lanes, arity == 2 ? "vv" : "v", name, vname);
            if (used_chars >= sizeof variants) return -1;
        }
        if (!variants[0]) continue;
        LLVMAttributeRef attr = LLVMCreateStringAttribute(ctx, "vector-function-abi-variant", 27, variants,
                                                          (unsigned)strlen(variants));
        for (LLVMUseRef u = LLVMGetFirstUse(fn); u; u = LLVMGetNextUse(u)) {
            LLVMValueRef call = LLVMGetUser(u);
            if (LLVMIsACallInst(call) && LLVMGetCalledValue(call) == fn) {
                LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, attr);
                ++n_mapped;
            }
        }
    }
    if (n_used > 0 && !LLVMGetNamedGlobal(mod, "llvm.compiler.used")) {
        LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
        LLVMValueRef init = LLVMConstArray2(ptr, used, (uint64_t)n_used);
        LLVMValueRef g = LLVMAddGlobal(mod, LLVMTypeOf(init), "llvm.compiler.used");
        LLVMSetInitializer(g, init);
        LLVMSetLinkage(g, LLVMAppendingLinkage);
        LLVMSetSection(g, "llvm.metadata");
    }
    return n_mapped;
}
