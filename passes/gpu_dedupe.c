/*===- gpu_dedupe.c - pt2-gpu-dedupe-kernels: one kernel per distinct body -===*
 *
 * gpu-kernel-outlining makes a gpu.module per launch, and a network's
 * repeated blocks launch the same kernel many times over: resnet50's graph
 * (batch 2) outlines 230 kernels of which 91 are distinct, mobilenetv2's
 * and visformer's likewise.  Everything after outlining (naming, the NVVM
 * lowering, LLVM's O3 and NVPTX back end, then the driver's or nvJitLink's
 * PTX compile at the first call) costs per kernel, so this pass keeps the
 * first module of each distinct kernel and points the launches of the
 * others at it.
 *
 * Two outlined modules are the same kernel when they print the same with
 * their own names (the module's and its gpu.func's) set aside: same
 * argument types and attributes (pt2-gpu-kernel-args, which runs first,
 * marks alignment and noalias per launch, so kernels launched on aliasing
 * buffers stay apart), same body, same shared-memory globals.  The text is
 * printed in local scope (nothing outside the module is numbered), hashed,
 * and compared in full where two hashes agree.  The modules are printed on
 * threads (each its own; the context is multithreaded), then compared on
 * one.
 *
 * A module holding anything else than one gpu.func and memref.globals is
 * left alone.  Launches are collected once and relinked from that list.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/threads.h"
#include "gpu_map.h"
#include "pt2.h"

#define PLACEHOLDER "pt2_dedupe_kernel"

typedef struct Text {
    char *data;
    size_t len, cap;
    bool failed; /* out of memory: the module is kept as it is */
} Text;

static void append_text(MlirStringRef s, void *user) {
    Text *t = user;
    if (t->failed) return;
    if (t->len + s.length + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + s.length + 1) cap *= 2;
        char *grown = realloc(t->data, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->data = grown;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s.data, s.length);
    t->len += s.length;
}

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

typedef struct Kernel {
    MlirOperation module, func;
    char *text; /* the module printed under the placeholder names */
    size_t len;
    uint64_t hash;
} Kernel;

static MlirStringRef symbol_name(MlirOperation op) {
    MlirAttribute a = mlirOperationGetAttributeByName(op, sref("sym_name"));
    return mlirAttributeIsNull(a) ? (MlirStringRef){NULL, 0} : mlirStringAttrGetValue(a);
}

/* The module's one gpu.func, if it holds only that and memref.globals. */
static MlirOperation sole_kernel(MlirOperation module) {
    MlirOperation found = {NULL};
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (gpu_is_op(op, "memref.global")) continue;
        if (!gpu_is_op(op, "gpu.func") || !mlirOperationIsNull(found)) return (MlirOperation){NULL};
        found = op;
    }
    return found;
}

/* The module as text with both names set to the placeholder (restored after). */
static bool print_anonymous(MlirOperation module, MlirOperation func, MlirAttribute placeholder, MlirOpPrintingFlags flags,
                            Text *out) {
    MlirAttribute module_name = mlirOperationGetAttributeByName(module, sref("sym_name"));
    MlirAttribute func_name = mlirOperationGetAttributeByName(func, sref("sym_name"));
    mlirOperationSetAttributeByName(module, sref("sym_name"), placeholder);
    mlirOperationSetAttributeByName(func, sref("sym_name"), placeholder);
    out->len = 0;
    out->failed = false;
    mlirOperationPrintWithFlags(module, flags, append_text, out);
    mlirOperationSetAttributeByName(module, sref("sym_name"), module_name);
    mlirOperationSetAttributeByName(func, sref("sym_name"), func_name);
    return !out->failed;
}

/* An open-addressing table of kernel indices by hash. */
typedef struct Table {
    int *slots; /* -1: empty */
    int cap;
} Table;

static int find_same(const Table *t, const Kernel *kernels, const Kernel *k) {
    for (int i = (int)(k->hash % (uint64_t)t->cap);; i = (i + 1) % t->cap) {
        int at = t->slots[i];
        if (at < 0) return -(i + 1); /* not there: -(free slot + 1) */
        const Kernel *o = &kernels[at];
        if (o->hash == k->hash && o->len == k->len && !memcmp(o->text, k->text, k->len)) return at;
    }
}

typedef struct Printing {
    Kernel *kernels;
    MlirAttribute placeholder;
    MlirOpPrintingFlags flags;
} Printing;

/* Kernel i's text and hash (text NULL: not printed, the module stays). */
static void print_kernel(void *ctx, int i) {
    Printing *p = ctx;
    Kernel *k = &p->kernels[i];
    Text text = {0};
    if (print_anonymous(k->module, k->func, p->placeholder, p->flags, &text)) {
        k->text = text.data;
        k->len = text.len;
        k->hash = hash_text(text.data, text.len);
    } else {
        free(text.data);
    }
}

static int run_dedupe(MlirOperation top, void *user) {
    (void)user;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(top, 0));
    int n_modules = 0;
    for (MlirOperation m = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        n_modules += gpu_is_op(m, "gpu.module");
    }
    if (n_modules < 2) return 0;
    Kernel *kernels = calloc((size_t)n_modules, sizeof *kernels);
    Table table = {malloc(sizeof(int) * (size_t)(4 * n_modules)), 4 * n_modules};
    if (!kernels || !table.slots) {
        free(kernels);
        free(table.slots);
        pt2_set_error("pt2-gpu-dedupe-kernels: out of memory");
        return -1;
    }
    for (int i = 0; i < table.cap; ++i) table.slots[i] = -1;
    int n = 0;
    for (MlirOperation m = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        MlirOperation func = gpu_is_op(m, "gpu.module") ? sole_kernel(m) : (MlirOperation){NULL};
        if (!mlirOperationIsNull(func)) kernels[n++] = (Kernel){m, func, NULL, 0, 0};
    }
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    mlirOpPrintingFlagsUseLocalScope(flags);
    mlirOpPrintingFlagsAssumeVerified(flags);
    Printing printing = {kernels, mlirStringAttrGet(mlirOperationGetContext(top), sref(PLACEHOLDER)), flags};
    int threads = pt2_threads_from_env("PT2_COMPILE_THREADS", 16), allowed = gpu_pass_threads();
    pt2_parallel_for(n, threads < allowed ? threads : allowed, print_kernel, &printing);
    mlirOpPrintingFlagsDestroy(flags);
    /* in module order: the first of each kernel stays, the others' launches move to it */
    OpList launches = gpu_collect_launches(top);
    for (int i = 0; i < n; ++i) {
        Kernel *k = &kernels[i];
        if (!k->text) continue;
        int same = find_same(&table, kernels, k);
        if (same < 0) {
            table.slots[-same - 1] = i;
            continue;
        }
        char to_module[256], to_kernel[256];
        MlirStringRef km = symbol_name(kernels[same].module), kf = symbol_name(kernels[same].func);
        snprintf(to_module, sizeof to_module, "%.*s", (int)km.length, km.data);
        snprintf(to_kernel, sizeof to_kernel, "%.*s", (int)kf.length, kf.data);
        gpu_relink_launch_list(&launches, symbol_name(k->module), to_module, to_kernel);
        mlirOperationDestroy(k->module);
    }
    for (int i = 0; i < n; ++i) free(kernels[i].text);
    free(kernels);
    free(table.slots);
    oplist_free(&launches);
    return 0;
}

static _Alignas(8) const char dedupe_type_id;

MlirPass pt2_create_gpu_dedupe_kernels_pass(void) {
    return make_external_pass("pt2-gpu-dedupe-kernels",
                              "Outlined GPU kernels that are the same (body, argument types and attributes) become one, "
                              "launched from every place (passes/gpu_dedupe.c)",
                              "builtin.module", run_dedupe, &dedupe_type_id);
}
