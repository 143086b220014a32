/*===- codegen.c - the LLVM stage: lowered module → object files (CPU) -----===*
 *
 *   LLVM dialect ─translate─▶ LLVM IR ─(host triple, libmvec variants, unnamed_addr)─▶ mergefunc
 *        ─split─▶ part 0 … part N-1, each on a thread: default<O3> → object file
 *
 * A graph's module is one kernel function (@main: library calls, OpenMP forks, serial loops), the
 * parallel regions MLIR's OpenMP translation outlines from it (one function each), and pt2_entry.
 * The outlined regions are independent units: their addresses go to the OpenMP runtime, nothing
 * inlines them, so they can be optimized and emitted in other threads (each with its own
 * LLVMContext, on a copy of the module parsed from bitcode) and linked as separate objects.
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include "codegen.h"
#include "threads.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../dialects/catalog.h"
#include "llvm-c/BitReader.h"
#include "llvm-c/BitWriter.h"
#include "llvm-c/Core.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "llvm-c/Transforms/PassBuilder.h"
#include "mlir-c/Target/LLVMIR.h"
#include "veclib.h"

#define MAX_PARTS PT2_CODEGEN_MAX_PARTS
/* A module of less work than this (PT2_COMPILE_SPLIT_MIN, for tests; in units of function_cost) is
 * compiled whole: a thread, a bitcode copy and a target machine per part cost a few milliseconds,
 * which a single small kernel does not win back (2000 since LOOP_COST went from 8 to 4: the same work). */
#define SPLIT_MIN_COST 2000
static int split_min_cost(void) {
    const char *env = getenv("PT2_COMPILE_SPLIT_MIN");
    return env && env[0] ? atoi(env) : SPLIT_MIN_COST;
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double clock_seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*===----------------------------------------------------------------------===*
 * Preparing the module
 *===----------------------------------------------------------------------===*/

/* With dump_dir, the LLVM IR goes there too (what `opt-22` and `llc-22` replay). */
static void dump_llvm(LLVMModuleRef mod, const char *dump_dir, const char *name) {
    if (!dump_dir) return;
    char path[4200], *err = NULL;
    snprintf(path, sizeof path, "%s/%s", dump_dir, name);
    if (LLVMPrintModuleToFile(mod, path, &err) != 0) fprintf(stderr, "pt2: cannot write %s: %s\n", path, err ? err : "");
    if (err) LLVMDisposeMessage(err);
}

/* Marks the module's internal functions unnamed_addr: nothing in a kernel compares their addresses (the
 * parallel regions MLIR outlines are only handed to the OpenMP runtime, which calls them), so that
 * LLVM's MergeFunctions replaces a function identical to another by it, without a thunk.  A graph's
 * repeated blocks of equal shapes give identical regions: 47 outlined functions of resnet50 at batch 2
 * are 8 distinct ones, mobilenetv2's 45 are 22, and merging them first took a third off LLVM's time
 * there (optimization 0.70 -> 0.48 s, code generation 0.54 -> 0.36 s, CPU). */
static void mark_unnamed_addr(LLVMModuleRef mod) {
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        if (!LLVMIsDeclaration(fn) && LLVMGetLinkage(fn) == LLVMInternalLinkage) LLVMSetUnnamedAddress(fn, LLVMGlobalUnnamedAddr);
    }
}

/* The kernels' heap functions (libpt2rt's alloc.c: finalize-memref-to-llvm{use-generic-functions}
 * lowers memref.alloc to them) return fresh memory as malloc does; LLVM knows that of malloc by name,
 * not of these, so their declarations say it (noalias results): two temporaries of a kernel are then
 * known apart, as they were when they were malloc's. */
static void mark_allocators(LLVMModuleRef mod) {
    static const char *names[] = {"_mlir_memref_to_llvm_alloc", "_mlir_memref_to_llvm_aligned_alloc"};
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        LLVMValueRef fn = LLVMGetNamedFunction(mod, names[i]);
        if (fn) LLVMAddAttributeAtIndex(fn, LLVMAttributeReturnIndex, LLVMCreateEnumAttribute(ctx, noalias, 0));
    }
}

/*===----------------------------------------------------------------------===*
 * The split
 *
 * A function with a body is a root (it goes to one part) if it is visible outside the module
 * (pt2_entry) or its address is taken (an outlined region, handed to __kmpc_fork_call); otherwise it
 * is a helper, only called directly (@main, from pt2_entry; libpt2rt's call wrappers, from @main),
 * and every part whose roots reach it keeps a copy of it, internal, so that it is inlined where it was
 * before.  Roots become external with hidden visibility, so that one part can reference another's;
 * a part keeps declarations of the roots of others and drops the helpers it does not reach.
 *===----------------------------------------------------------------------===*/

typedef struct FnPlan {
    bool has_body, root;
    bool assigned;    /* roots: given to a part */
    int part;         /* roots: the part that compiles it */
    int cost;         /* function_cost */
    int weight;       /* roots: its cost and that of the helpers it reaches, for the balance */
    bool *needed;     /* helpers: needed[part] */
} FnPlan;

/* What LLVM's optimization and code generation of fn cost, in instructions, each instruction in a loop
 * counted LOOP_COST times: the vectorizers, unrolling and instruction selection of a loop cost about
 * that much more per instruction than straight-line code.  Timed per function with opt-22 and llc-22
 * (BERT at batch 2: @main, 1100 instructions besides its descriptors' insertvalue/extractvalue, 57 ms;
 * parallel regions of 200-500 instructions of loops, 17-34 ms each), and by the parts' thread CPU
 * times: with 4 the parts of BERT, GPT-2, DistilBERT, mobilenetv2 and resnet50 came within 10-20 % of
 * each other (with 8, and descriptors counted, BERT's were 0.09 / 0.15 s, GPT-2's 0.09 / 0.21, T5's
 * 0.13 / 0.35; T5's are still 0.19 / 0.28).  Loops are found by
 * their back edges: a branch to a block at or before the branch's own in the function's order (MLIR
 * lays a loop's blocks out between its header and its latch). */
#define LOOP_COST 4

typedef struct BlockIndex {
    LLVMBasicBlockRef block;
    int index;
} BlockIndex;

static int compare_blocks(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const BlockIndex *)a)->block, y = (uintptr_t)((const BlockIndex *)b)->block;
    return x < y ? -1 : x > y;
}

/* Whether instruction `in` counts: the memref descriptors MLIR builds and takes apart (insertvalue,
 * extractvalue) fold away in LLVM's first instcombine and cost nothing after it; BERT's @main was 6800
 * instructions, 5700 of them these, and as many counted it outweighed the parallel regions of both
 * parts together (part 0, with it, took 0.09 s of CPU where part 1 took 0.15). */
static int costs_work(LLVMValueRef in) {
    LLVMOpcode op = LLVMGetInstructionOpcode(in);
    return op != LLVMInsertValue && op != LLVMExtractValue;
}

static int function_cost(LLVMValueRef fn) {
    int n_blocks = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) ++n_blocks;
    if (n_blocks == 0) return 0;
    BlockIndex *order = calloc((size_t)n_blocks, sizeof *order);
    int *sizes = calloc((size_t)n_blocks, sizeof *sizes), *loops = calloc((size_t)n_blocks + 1, sizeof *loops);
    int i = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb), ++i) {
        order[i] = (BlockIndex){bb, i};
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) sizes[i] += costs_work(in);
    }
    qsort(order, (size_t)n_blocks, sizeof *order, compare_blocks);
    /* loops[j]: how many back edges' spans [target, source] start at j, less those that ended before j */
    i = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb), ++i) {
        LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
        unsigned n_succ = term ? LLVMGetNumSuccessors(term) : 0;
        for (unsigned k = 0; k < n_succ; ++k) {
            BlockIndex key = {LLVMGetSuccessor(term, k), 0};
            const BlockIndex *hit = bsearch(&key, order, (size_t)n_blocks, sizeof *order, compare_blocks);
            if (!hit || hit->index > i) continue;
            ++loops[hit->index];
            --loops[i + 1];
        }
    }
    int cost = 0, depth = 0;
    for (i = 0; i < n_blocks; ++i) {
        depth += loops[i];
        cost += sizes[i] * (depth > 0 ? LOOP_COST : 1);
    }
    free(order);
    free(sizes);
    free(loops);
    return cost;
}

/* Whether fn is used other than as the callee of a direct call. */
static bool address_taken(LLVMValueRef fn) {
    for (LLVMUseRef use = LLVMGetFirstUse(fn); use; use = LLVMGetNextUse(use)) {
        LLVMValueRef user = LLVMGetUser(use);
        if (!LLVMIsACallInst(user) || LLVMGetCalledValue(user) != fn) return true;
        for (unsigned i = 0; i < LLVMGetNumArgOperands(user); ++i) {
            if (LLVMGetOperand(user, i) == fn) return true;
        }
    }
    return false;
}

static int function_index(LLVMValueRef *fns, int n, LLVMValueRef fn) {
    for (int i = 0; i < n; ++i) {
        if (fns[i] == fn) return i;
    }
    return -1;
}

/* Marks the helpers reachable from function i through direct calls in mark[] (mark[j * stride]);
 * returns the cost of those it marked. */
static int mark_helpers(LLVMValueRef *fns, const FnPlan *plan, int n, int i, bool *mark, int stride) {
    int added = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fns[i]); bb; bb = LLVMGetNextBasicBlock(bb)) {
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            if (!LLVMIsACallInst(in)) continue;
            int j = function_index(fns, n, LLVMGetCalledValue(in));
            if (j < 0 || plan[j].root || !plan[j].has_body || mark[(size_t)j * stride]) continue;
            mark[(size_t)j * stride] = true;
            added += plan[j].cost + mark_helpers(fns, plan, n, j, mark, stride);
        }
    }
    return added;
}

/* Plans the parts (at most max_parts) of mod; returns how many there are (1: compile it whole). */
static int plan_parts(LLVMModuleRef mod, int max_parts, FnPlan **out_plan, int *out_n) {
    int n = 0, total = 0, n_roots = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) ++n;
    LLVMValueRef *fns = calloc((size_t)n + 1, sizeof *fns);
    FnPlan *plan = calloc((size_t)n + 1, sizeof *plan);
    bool *needed = calloc((size_t)(n + 1) * MAX_PARTS, sizeof *needed);
    n = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn), ++n) {
        fns[n] = fn;
        plan[n].needed = needed + (size_t)n * MAX_PARTS;
        plan[n].has_body = !LLVMIsDeclaration(fn);
        if (!plan[n].has_body) continue;
        LLVMLinkage linkage = LLVMGetLinkage(fn);
        bool local = linkage == LLVMInternalLinkage || linkage == LLVMPrivateLinkage;
        plan[n].root = !local || address_taken(fn);
        n_roots += plan[n].root;
        plan[n].cost = function_cost(fn);
        total += plan[n].cost;
    }
    int parts = max_parts < n_roots ? max_parts : n_roots;
    /* a global defined with outside linkage would be defined by every part: compile such a module whole */
    for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g)) {
        LLVMLinkage linkage = LLVMGetLinkage(g);
        bool local = linkage == LLVMInternalLinkage || linkage == LLVMPrivateLinkage || linkage == LLVMAppendingLinkage;
        if (!LLVMIsDeclaration(g) && !local) parts = 1;
    }
    if (total < split_min_cost()) parts = 1;
    if (parts > 1) {
        /* the heaviest root (with the helpers it reaches: pt2_entry carries @main) first, each to the
         * part of the least cost so far; then each part's helpers */
        bool *seen = calloc((size_t)n + 1, sizeof *seen);
        for (int i = 0; i < n; ++i) {
            if (!plan[i].root) continue;
            memset(seen, 0, (size_t)n * sizeof *seen);
            plan[i].weight = plan[i].cost + mark_helpers(fns, plan, n, i, seen, 1);
        }
        free(seen);
        int load[MAX_PARTS] = {0};
        for (int assigned = 0; assigned < n_roots; ++assigned) {
            int best = -1;
            for (int i = 0; i < n; ++i) {
                if (plan[i].root && !plan[i].assigned && (best < 0 || plan[i].weight > plan[best].weight)) best = i;
            }
            int part = 0;
            for (int p = 1; p < parts; ++p) {
                if (load[p] < load[part]) part = p;
            }
            plan[best].part = part;
            plan[best].assigned = true;
            load[part] += plan[best].weight;
            mark_helpers(fns, plan, n, best, &plan[0].needed[part], MAX_PARTS);
        }
    }
    free(fns);
    if (parts <= 1) {
        free(needed);
        free(plan);
        return 1;
    }
    *out_plan = plan;
    *out_n = n;
    return parts;
}

static void free_plan(FnPlan *plan) {
    if (!plan) return;
    free(plan[0].needed);
    free(plan);
}

/* Turns fn into a declaration: its values replaced by poison, its instructions and blocks erased. */
static void drop_body(LLVMValueRef fn) {
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMTypeRef t = LLVMTypeOf(in);
            if (LLVMGetTypeKind(t) != LLVMVoidTypeKind) LLVMReplaceAllUsesWith(in, LLVMGetPoison(t));
        }
    }
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        LLVMValueRef in;
        while ((in = LLVMGetLastInstruction(bb))) LLVMInstructionEraseFromParent(in);
    }
    LLVMBasicBlockRef bb;
    while ((bb = LLVMGetFirstBasicBlock(fn))) LLVMDeleteBasicBlock(bb);
}

/* Keeps in mod (a copy of the planned module, its functions in the same order) what part compiles. */
static void keep_part(LLVMModuleRef mod, const FnPlan *plan, int part) {
    int i = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn), ++i) {
        if (!plan[i].has_body) continue;
        if (plan[i].root) {
            if (plan[i].part != part) drop_body(fn);
            if (LLVMGetLinkage(fn) == LLVMInternalLinkage || LLVMGetLinkage(fn) == LLVMPrivateLinkage) {
                LLVMSetLinkage(fn, LLVMExternalLinkage);
                LLVMSetVisibility(fn, LLVMHiddenVisibility);
            }
        } else if (!plan[i].needed[part]) {
            drop_body(fn);
        }
    }
    /* the helpers this part does not need: nothing calls them now */
    i = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod), next; fn; fn = next, ++i) {
        next = LLVMGetNextFunction(fn);
        if (plan[i].has_body && !plan[i].root && !plan[i].needed[part]) LLVMDeleteFunction(fn);
    }
}

/*===----------------------------------------------------------------------===*
 * Optimizing and emitting a part
 *===----------------------------------------------------------------------===*/

typedef struct Part {
    /* in */
    int index, opt_level;
    bool vectorize;
    const FnPlan *plan; /* NULL: the whole module */
    const char *bitcode;
    size_t bitcode_size;
    LLVMModuleRef given; /* part 0 works on the module itself */
    const char *triple, *cpu, *features, *obj_path, *dump_dir;
    /* out */
    double opt_cpu, codegen_cpu;
    int rc;
    char error[1024];
} Part;

static void *compile_part(void *arg) {
    Part *p = arg;
    p->rc = -1;
    LLVMContextRef ctx = NULL;
    LLVMModuleRef mod = p->given;
    char *err = NULL;
    if (!mod) {
        ctx = LLVMContextCreate();
        LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(p->bitcode, p->bitcode_size, "pt2-part", 0);
        bool bad = LLVMParseBitcodeInContext2(ctx, buf, &mod) != 0;
        LLVMDisposeMemoryBuffer(buf);
        if (bad) {
            snprintf(p->error, sizeof p->error, "internal: a part of the module does not parse back from bitcode");
            LLVMContextDispose(ctx);
            return NULL;
        }
    }
    if (p->plan) keep_part(mod, p->plan, p->index);
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(p->triple, &target, &err) != 0) {
        snprintf(p->error, sizeof p->error, "internal: no LLVM target for %s: %s", p->triple, err ? err : "");
        goto done;
    }
    LLVMCodeGenOptLevel cg = p->opt_level >= 3   ? LLVMCodeGenLevelAggressive
                             : p->opt_level == 0 ? LLVMCodeGenLevelNone
                                                 : LLVMCodeGenLevelDefault;
    LLVMTargetMachineRef tm =
        LLVMCreateTargetMachine(target, p->triple, p->cpu, p->features, cg, LLVMRelocPIC, LLVMCodeModelDefault);
    LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(pbo, p->vectorize);
    LLVMPassBuilderOptionsSetSLPVectorization(pbo, p->vectorize);
    char passes[32];
    snprintf(passes, sizeof passes, "default<O%d>", p->opt_level < 0 ? 0 : p->opt_level > 3 ? 3 : p->opt_level);
    double t0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    LLVMErrorRef e = LLVMRunPasses(mod, passes, tm, pbo);
    double t1 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    LLVMDisposePassBuilderOptions(pbo);
    if (e) {
        char *msg = LLVMGetErrorMessage(e);
        snprintf(p->error, sizeof p->error, "internal: LLVM optimization failed: %s", msg);
        LLVMDisposeErrorMessage(msg);
    } else {
        char name[64];
        snprintf(name, sizeof name, p->plan ? "91-llvm-opt-part%d.ll" : "91-llvm-opt.ll", p->index);
        dump_llvm(mod, p->dump_dir, name);
        if (LLVMTargetMachineEmitToFile(tm, mod, (char *)p->obj_path, LLVMObjectFile, &err) != 0) {
            snprintf(p->error, sizeof p->error, "internal: object emission failed: %s", err ? err : "");
        } else {
            p->rc = 0;
        }
    }
    p->opt_cpu = t1 - t0;
    p->codegen_cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - t1;
    LLVMDisposeTargetMachine(tm);
done:
    if (err) LLVMDisposeMessage(err);
    if (ctx) {
        LLVMDisposeModule(mod);
        LLVMContextDispose(ctx);
    }
    return NULL;
}

/* The threads to compile a module's parts on: PT2_COMPILE_THREADS, else the CPUs this process may run
 * on, at most MAX_PARTS. */
static int compile_threads(void) { return pt2_threads_from_env("PT2_COMPILE_THREADS", MAX_PARTS); }

/*===----------------------------------------------------------------------===*
 * pt2_codegen_objects
 *===----------------------------------------------------------------------===*/

static void initialize_llvm(void) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
}

int pt2_codegen_objects(MlirOperation module, int opt_level, bool vectorize, const char *obj_prefix, const char *dump_dir,
                        Pt2CodegenTimes *times) {
    static pthread_once_t initialized = PTHREAD_ONCE_INIT;
    pthread_once(&initialized, initialize_llvm);
    double wall0 = wall_now(), cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    memset(times, 0, sizeof *times);
    LLVMContextRef llctx = LLVMContextCreate();
    LLVMModuleRef mod = mlirTranslateModuleToLLVMIR(module, llctx);
    if (!mod) {
        LLVMContextDispose(llctx);
        pt2_set_error("internal: translation of the lowered module to LLVM IR failed");
        return -1;
    }
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    char *err = NULL;
    LLVMTargetRef target;
    int n_parts = -1, n_fns = 0;
    FnPlan *plan = NULL;
    LLVMMemoryBufferRef bitcode = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err) != 0) {
        pt2_set_error("internal: no LLVM target for %s: %s", triple, err);
        goto done;
    }
    LLVMTargetMachineRef tm =
        LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelDefault, LLVMRelocPIC, LLVMCodeModelDefault);
    LLVMSetTarget(mod, triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, dl);
    LLVMDisposeTargetData(dl);
    if (vectorize) pt2_attach_vector_variants(mod, features);
    mark_unnamed_addr(mod);
    mark_allocators(mod);
    dump_llvm(mod, dump_dir, "90-llvm.ll");
    /* identical loop nests (a network's repeated blocks) are optimized and emitted once, in one part */
    LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(mod, "mergefunc", tm, pbo);
    LLVMDisposePassBuilderOptions(pbo);
    LLVMDisposeTargetMachine(tm);
    if (e) {
        char *msg = LLVMGetErrorMessage(e);
        pt2_set_error("internal: LLVM's mergefunc failed: %s", msg);
        LLVMDisposeErrorMessage(msg);
        goto done;
    }
    int parts = plan_parts(mod, compile_threads(), &plan, &n_fns);
    if (parts > 1) bitcode = LLVMWriteBitcodeToMemoryBuffer(mod);
    Part part[MAX_PARTS];
    memset(part, 0, sizeof part);
    char paths[MAX_PARTS][4400];
    for (int k = 0; k < parts; ++k) {
        snprintf(paths[k], sizeof paths[k], "%s.%d.o", obj_prefix, k);
        part[k] = (Part){.index = k, .opt_level = opt_level, .vectorize = vectorize, .plan = parts > 1 ? plan : NULL,
                         .bitcode = bitcode ? LLVMGetBufferStart(bitcode) : NULL,
                         .bitcode_size = bitcode ? LLVMGetBufferSize(bitcode) : 0, .given = k == 0 ? mod : NULL,
                         .triple = triple, .cpu = cpu, .features = features, .obj_path = paths[k], .dump_dir = dump_dir};
    }
    times->translate_wall = wall_now() - wall0;
    times->translate_cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    double llvm0 = wall_now();
    pthread_t threads[MAX_PARTS];
    bool started[MAX_PARTS] = {false};
    for (int k = 1; k < parts; ++k) started[k] = pthread_create(&threads[k], NULL, compile_part, &part[k]) == 0;
    compile_part(&part[0]);
    for (int k = 1; k < parts; ++k) {
        if (started[k]) {
            pthread_join(threads[k], NULL);
        } else {
            compile_part(&part[k]); /* no thread to be had: here, after the others */
        }
    }
    times->llvm_wall = wall_now() - llvm0;
    times->parts = parts;
    n_parts = parts;
    for (int k = 0; k < parts; ++k) {
        times->opt_cpu += part[k].opt_cpu;
        times->codegen_cpu += part[k].codegen_cpu;
        if (part[k].rc != 0 && n_parts > 0) {
            pt2_set_error("%s", part[k].error);
            n_parts = -1;
        }
    }
    if (n_parts < 0) {
        for (int k = 0; k < parts; ++k) unlink(paths[k]);
    }
done:
    if (bitcode) LLVMDisposeMemoryBuffer(bitcode);
    free_plan(plan);
    if (err) LLVMDisposeMessage(err);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    LLVMDisposeModule(mod);
    LLVMContextDispose(llctx);
    return n_parts;
}
