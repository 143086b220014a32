/*===- kernel.c - compile a pt2 module to native code, cache it, load it ---===*
 *
 *   text ─parse/verify─▶ pt2 module ─(cache hit?)─▶ dlopen ─▶ Pt2Kernel
 *                            │ miss
 *                            ▼ pt2CpuPipelineText passes → LLVM dialect
 *        runtime/codegen.c: LLVM IR → O3 for the host CPU (parts on threads) → objects → cc -shared → .so
 *                            ▼
 *                 PT2_CACHE_DIR/<sha256>.so + .meta (checked before loading)
 *
 * The kernel's ABI: `void pt2_entry(void **descriptors)`, one MLIR memref
 * descriptor {allocated, aligned, offset, sizes[r], strides[r]} per argument,
 * inputs then outputs (see passes/entry.c), called through libpt2rt's
 * pt2rt_run, which collects the index errors the run reports (the calls:
 * kernel_call.c).
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <pwd.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../dialects/catalog.h"
#include "rt/pt2rt.h"
#include "llvm-c/Core.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "llvm/Config/llvm-config.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "codegen.h"
#include "kernel_impl.h"
#include "pt2.h"
#include "rt/pt2rt.h"
#include "sha256.h"
#include "veclib.h"

/* in every cache key: 0.2 kernels take their OpenMP calls from libpt2rt */
#define PT2_VERSION "pt2-0.2"
#define META_MAGIC "pt2-kernel-v1"

extern char **environ;
char *pt2_operation_to_text(MlirOperation op, bool debug_info);

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (every compile thread): what PT2_LOGS=compile reports beside the
 * wall time, which on a shared machine measures the other jobs as much as the compiler. */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pt2CompileOptionsInit(Pt2CompileOptions *opts) {
    memset(opts, 0, sizeof *opts);
    opts->opt_level = 3;
}

/*===----------------------------------------------------------------------===*
 * Diagnostics → pt2GetLastError
 *===----------------------------------------------------------------------===*/

/* Diagnostics of one compile, collected as text (libpt2's Pt2TextBuf). */
typedef struct DiagCollector {
    char text[2048];
    Pt2TextBuf buf;
} DiagCollector;

static void diag_append(MlirStringRef s, void *user) { pt2_textbuf_append(s, &((DiagCollector *)user)->buf); }

/* Errors read "file:line:col: error: ..." as compilers print them (MLIR's
 * own rendering is loc("file":line:col)), so editors and users find the line. */
static void append_location(DiagCollector *c, MlirLocation loc) {
    if (!mlirLocationIsAFileLineColRange(loc)) {
        mlirLocationPrint(loc, diag_append, c);
        return;
    }
    char pos[48];
    snprintf(pos, sizeof pos, ":%d:%d", mlirLocationFileLineColRangeGetStartLine(loc),
             mlirLocationFileLineColRangeGetStartColumn(loc));
    diag_append(mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc)), c);
    diag_append(mlirStringRefCreateFromCString(pos), c);
}

static MlirLogicalResult collect_diag(MlirDiagnostic d, void *user) {
    DiagCollector *c = user;
    if (mlirDiagnosticGetSeverity(d) != MlirDiagnosticError) return mlirLogicalResultSuccess();
    if (c->buf.len) diag_append(mlirStringRefCreateFromCString("\n"), c);
    append_location(c, mlirDiagnosticGetLocation(d));
    diag_append(mlirStringRefCreateFromCString(": error: "), c);
    mlirDiagnosticPrint(d, diag_append, c);
    return mlirLogicalResultSuccess();
}

/*===----------------------------------------------------------------------===*
 * Signature
 *===----------------------------------------------------------------------===*/

/* Reports a problem with what is to be compiled as a diagnostic at `at`
 * (pt2CompileText's collector gives it file:line:col) and as the last error. */
static void located_error(MlirOperation at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void located_error(MlirOperation at, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt2_set_error("%s", msg);
    mlirEmitError(mlirOperationGetLocation(at), msg);
}

static MlirOperation find_func(MlirOperation module, const char *func_name) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), mlirStringRefCreateFromCString("func.func"))) continue;
        /* by default the first definition: declarations (extern helpers) have nothing to run */
        if (!func_name && !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)))) return op;
        if (!func_name) continue;
        MlirStringRef n = mlirStringAttrGetValue(mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("sym_name")));
        if (strlen(func_name) == n.length && strncmp(func_name, n.data, n.length) == 0) return op;
    }
    return (MlirOperation){NULL};
}

static int read_signature(MlirOperation func, Pt2Kernel *k) {
    MlirStringRef name = mlirStringAttrGetValue(mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("sym_name")));
    if (mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)))) {
        located_error(func, "@%.*s is a declaration without a body: there is nothing to compile", (int)name.length, name.data);
        return -1;
    }
    MlirType fty = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("function_type")));
    k->n_inputs = (int)mlirFunctionTypeGetNumInputs(fty);
    k->n_outputs = (int)mlirFunctionTypeGetNumResults(fty);
    k->types = calloc((size_t)(k->n_inputs + k->n_outputs + 1), sizeof *k->types);
    for (int i = 0; i < k->n_inputs + k->n_outputs; ++i) {
        MlirType t = i < k->n_inputs ? mlirFunctionTypeGetInput(fty, i) : mlirFunctionTypeGetResult(fty, i - k->n_inputs);
        if (pt2_tensor_type_from_mlir(t, &k->types[i]) != 0) {
            char type_text[256] = "";
            Pt2TextBuf type = {type_text, sizeof type_text, 0};
            mlirTypePrint(t, pt2_textbuf_append, &type);
            located_error(func,
                          "@%.*s: %s %d has type %s; a compiled function takes and returns static-shaped tensors of f32, "
                          "f16, bf16, f64, i64, i32, i16, i8, ui8 or i1 (rank <= %d)",
                          (int)name.length, name.data, i < k->n_inputs ? "argument" : "result",
                          i < k->n_inputs ? i : i - k->n_inputs, type_text, PT2_MAX_RANK);
            return -1;
        }
    }
    if (k->n_outputs == 0) {
        located_error(func, "@%.*s returns nothing: a compiled pt2 function must return at least one tensor", (int)name.length,
                      name.data);
        return -1;
    }
    k->frozen = calloc((size_t)k->n_inputs + 1, sizeof(bool));
    MlirAttribute arg_attrs = mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("arg_attrs"));
    for (int i = 0; !mlirAttributeIsNull(arg_attrs) && i < k->n_inputs && i < mlirArrayAttrGetNumElements(arg_attrs); ++i) {
        MlirAttribute dict = mlirArrayAttrGetElement(arg_attrs, i);
        k->frozen[i] = mlirAttributeIsADictionary(dict) &&
                       !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(dict, mlirStringRefCreateFromCString("pt2.frozen")));
    }
    return 0;
}

/*===----------------------------------------------------------------------===*
 * The disk cache
 *===----------------------------------------------------------------------===*/

static int make_private_dir(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; ++p) {
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0700);
            *p = '/';
        }
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) return -1;
    return 0;
}

static void cache_dir(const Pt2CompileOptions *opts, char *out, size_t cap) {
    const char *d = opts && opts->cache_dir ? opts->cache_dir : getenv("PT2_CACHE_DIR");
    if (d && d[0]) {
        snprintf(out, cap, "%s", d);
        return;
    }
    const char *home = getenv("HOME");
    if (!home || !home[0]) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : "/tmp";
    }
    snprintf(out, cap, "%s/.cache/pt2", home);
}

static int hash_file(const char *path, char out[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    Sha256 s;
    sha256_init(&s);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&s, buf, n);
    fclose(f);
    sha256_final_hex(&s, out);
    return 0;
}

/* An entry is used only if its metadata names this key, the shared object's
 * hash matches, and both files belong to us and are not writable by others. */
static bool cache_entry_valid(const char *so_path, const char *meta_path, const char *key) {
    struct stat st;
    const char *paths[2] = {so_path, meta_path};
    for (int i = 0; i < 2; ++i) {
        if (stat(paths[i], &st) != 0) return false;
        if (st.st_uid != getuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) || !S_ISREG(st.st_mode)) return false;
    }
    FILE *f = fopen(meta_path, "r");
    if (!f) return false;
    char magic[64] = {0}, meta_key[80] = {0}, so_hash[80] = {0};
    int ok = fscanf(f, "%63s %79s %79s", magic, meta_key, so_hash) == 3;
    fclose(f);
    if (!ok || strcmp(magic, META_MAGIC) != 0 || strcmp(meta_key, key) != 0) return false;
    char actual[65];
    return hash_file(so_path, actual) == 0 && strcmp(actual, so_hash) == 0;
}

/*===----------------------------------------------------------------------===*
 * Code generation
 *===----------------------------------------------------------------------===*/

/* dl_iterate_phdr's callback: in the loaded image that holds `inside`, the GNU build ID note (the
 * linker's hash of the image's contents) as hex in `out`; `found` false if the image has none. */
typedef struct BuildId {
    const void *inside; /* an address in the image */
    char *out;
    size_t cap;
    bool found;
} BuildId;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *user) {
    (void)size;
    BuildId *b = user;
    uintptr_t at = (uintptr_t)b->inside;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum && !mine; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        mine = ph->p_type == PT_LOAD && at >= start && at < start + ph->p_memsz;
    }
    if (!mine) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *note = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *note, *desc = name + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 && note->n_descsz > 0 &&
                2 * (size_t)note->n_descsz < b->cap) {
                for (unsigned k = 0; k < note->n_descsz; ++k) snprintf(b->out + 2 * k, 3, "%02x", (unsigned char)desc[k]);
                b->found = true;
                return 1;
            }
            p = desc + ((note->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

/* The compiler's identity for cache keys, so that a rebuilt compiler never reuses kernels an older
 * one produced: libpt2's build ID (CMakeLists.txt links it with --build-id), else the hash of its
 * file.  Hashing the 2.8 MB file cost every process's first compile 11 ms. */
static const char *compiler_identity(void) {
    static char identity[65];
    if (!identity[0]) {
        BuildId b = {(const void *)&compiler_identity, identity + 9, sizeof identity - 9, false};
        memcpy(identity, "build-id:", 9);
        dl_iterate_phdr(find_build_id, &b);
        Dl_info info;
        if (!b.found && (dladdr((void *)&compiler_identity, &info) == 0 || !info.dli_fname || hash_file(info.dli_fname, identity) != 0)) {
            snprintf(identity, sizeof identity, "%s", PT2_VERSION "-unknown-build");
        }
    }
    return identity;
}

static void target_description(char *out, size_t cap) {
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    snprintf(out, cap, "%s|%s|%s|llvm-%d", triple, cpu, features, LLVM_VERSION_MAJOR);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
}

/* A pass manager for the pipelines, without MLIR's verifier after every pass: verifying a graph's
 * module after each of the ~50 passes cost nearly as much as running them (CPU, mobilenetv2 at batch
 * 2: 0.14 s against 0.17 s; BERT: 0.25 against 0.55), 0.10 and 0.18 s of it after upstream passes.
 * pt2's own passes verify what they leave (passes/ir.c), so the module is verified after every step
 * pt2 wrote and at the end (pt2-entry is the last pass); upstream passes are trusted to turn valid IR
 * into valid IR.  PT2_VERIFY_EACH=1 verifies after every pass again (to find a pass that breaks it). */
static MlirPassManager new_pass_manager(MlirContext ctx) {
    MlirPassManager pm = mlirPassManagerCreateOnOperation(ctx, mlirStringRefCreateFromCString("builtin.module"));
    const char *each = getenv("PT2_VERIFY_EACH");
    if (!each || !each[0] || !strcmp(each, "0")) mlirPassManagerEnableVerifier(pm, false);
    return pm;
}

/* Dumping writes 00-input.mlir and the IR after every pipeline element into dump_root itself when the
 * caller named the folder for this one kernel (key NULL: pt2-run --dump-ir), else (PT2_DUMP=DIR, many
 * kernels per process) into dump_root/<NNN>-<key prefix>/, NNN counting the kernels this process dumped
 * so that a model's graphs keep their order. */
static int run_pipeline(MlirContext ctx, MlirOperation module, const char *pipeline, const char *dump_root, const char *key,
                        char out_dump_dir[4096]) {
    if (!dump_root) {
        MlirPassManager pm = new_pass_manager(ctx);
        if (getenv("PT2_NOVERIFY")) mlirPassManagerEnableVerifier(pm, false);
        int rc = pt2PipelineAdd(ctx, mlirPassManagerGetAsOpPassManager(pm), pipeline);
        if (rc == 0 && mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module))) rc = -1;
        mlirPassManagerDestroy(pm);
        return rc;
    }
    static _Atomic int dumped;
    char dump_dir[4096], path[4200];
    make_private_dir(dump_root);
    if (key) {
        snprintf(dump_dir, sizeof dump_dir, "%s/%03d-%.12s", dump_root, dumped++, key);
        make_private_dir(dump_dir);
    } else {
        snprintf(dump_dir, sizeof dump_dir, "%s", dump_root);
    }
    if (out_dump_dir) snprintf(out_dump_dir, 4096, "%s", dump_dir);
    snprintf(path, sizeof path, "%s/00-input.mlir", dump_dir);
    char *text = pt2_operation_to_text(module, false);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    free(text);
    char *copy = strdup(pipeline);
    int step = 1, depth = 0, rc = 0;
    char *start = copy;
    for (char *p = copy;; ++p) {
        if (*p == '(' || *p == '{') ++depth;
        if (*p == ')' || *p == '}') --depth;
        if ((*p == ',' && depth == 0) || *p == 0) {
            char saved = *p;
            *p = 0;
            MlirPassManager pm = new_pass_manager(ctx);
            rc = pt2PipelineAdd(ctx, mlirPassManagerGetAsOpPassManager(pm), start);
            if (rc == 0 && mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module))) rc = -1;
            mlirPassManagerDestroy(pm);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(start, "({"), start);
            for (char *q = name; *q; ++q) {
                if (*q == '.' || *q == '/') *q = '_';
            }
            snprintf(path, sizeof path, "%s/%02d-%s.mlir", dump_dir, step++, name);
            text = pt2_operation_to_text(module, false);
            f = fopen(path, "w");
            if (f) {
                fputs(text, f);
                fclose(f);
            }
            free(text);
            if (rc != 0 || saved == 0) break;
            start = p + 1;
        }
    }
    free(copy);
    return rc;
}

/* libpt2rt.so, the support library kernels call into (runtime/rt/: BLAS
 * matmuls): PT2_RT_LIBRARY, else the one the build put beside libpt2.so.
 * NULL, with the error set, if it is not there. */
static const char *rt_library(void) {
    static char beside[4096];
    const char *env = getenv("PT2_RT_LIBRARY");
    const char *path = env && env[0] ? env : beside;
    if (path == beside && !beside[0]) {
        Dl_info info;
        const char *self = dladdr((void *)&rt_library, &info) && info.dli_fname ? info.dli_fname : "";
        const char *slash = strrchr(self, '/');
        snprintf(beside, sizeof beside, "%.*s/libpt2rt.so", slash ? (int)(slash - self) : 1, slash ? self : ".");
    }
    if (access(path, R_OK) != 0) {
        pt2_set_error("pt2's runtime library %s is missing (%s): build the pt2rt target beside libpt2.so, or set "
                      "PT2_RT_LIBRARY to its path",
                      path, strerror(errno));
        return NULL;
    }
    return path;
}

/* Runs argv (argv[0] looked up in PATH) and waits; its exit status, or -1 with errno_out set when it
 * cannot run.  quiet: its stderr goes to /dev/null. */
static int run_tool(char **argv, bool quiet, int *errno_out) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (quiet) posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        *errno_out = rc;
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Links the kernel's objects (`<obj_prefix>.<k>.o`, k < n_objects) against libpt2rt (which serves its
 * OpenMP calls too: runtime/rt/kmpc.c), with an rpath to libpt2rt's folder so that dlopen finds it
 * wherever the build put it.  With gold where the compiler finds it (`-fuse-ld=gold`: 16 ms a kernel
 * against BFD ld's 30, a T5's nine graphs link five kernels): the first link of the process tries it
 * quietly and, if it fails, every link uses the default linker. */
static int link_shared(const char *obj_prefix, int n_objects, const char *so_path, const char *rt) {
    static _Atomic int gold = 0; /* 0: not tried, 1: works, -1: not there */
    const char *cc = getenv("PT2_CC");
    if (!cc || !cc[0]) cc = "cc";
    char rt_dir[4096];
    const char *slash = strrchr(rt, '/');
    snprintf(rt_dir, sizeof rt_dir, "%.*s", slash ? (int)(slash - rt) : 1, slash ? rt : ".");
    /* -Xlinker pairs: a folder with a comma would be split by -Wl, */
    /* libmvec (the vector math variants, runtime/veclib.c) where glibc has it */
    const char *mvec = pt2_libmvec_path();
    char objects[PT2_CODEGEN_MAX_PARTS][4420];
    char *argv[16 + PT2_CODEGEN_MAX_PARTS] = {(char *)cc, "-fuse-ld=gold", "-shared", "-o", (char *)so_path};
    int argc = 5;
    for (int i = 0; i < n_objects && i < PT2_CODEGEN_MAX_PARTS; ++i) {
        snprintf(objects[i], sizeof objects[i], "%s.%d.o", obj_prefix, i);
        argv[argc++] = objects[i];
    }
    const char *tail[] = {rt, "-Xlinker", "-rpath", "-Xlinker", rt_dir, "-lm", mvec};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0] && tail[i]; ++i) argv[argc++] = (char *)tail[i];
    argv[argc] = NULL;
    int err = 0, status = -1;
    if (gold >= 0) {
        status = run_tool(argv, gold == 0, &err);
        if (gold == 0) gold = status == 0 ? 1 : -1;
    }
    if (gold < 0) {
        argv[1] = argv[0]; /* without -fuse-ld=gold */
        status = run_tool(argv + 1, false, &err);
    }
    if (status < 0) {
        pt2_set_error("cannot run the linker '%s': %s (set PT2_CC)", cc, strerror(err));
        return -1;
    }
    if (status != 0) {
        pt2_set_error("linking the kernel with '%s' failed (exit status %d)", cc, status);
        return -1;
    }
    return 0;
}

static void set_num_threads(void *handle, const Pt2CompileOptions *opts) {
    int n = opts ? opts->num_threads : 0;
    const char *env = getenv("PT2_NUM_THREADS");
    if (n <= 0 && env && atoi(env) > 0) n = atoi(env);
    if (n <= 0) return; /* the OpenMP runtime's default: every core available */
    void (*set)(int) = NULL;
    void *sym = dlsym(handle, "omp_set_num_threads");
    memcpy(&set, &sym, sizeof set);
    if (set) set(n);
}

static int count_frozen(const Pt2Kernel *k) {
    int n = 0;
    for (int i = 0; i < k->n_inputs; ++i) n += k->frozen[i];
    return n;
}

/* pt2SetCpuHalfMatmulKernel's function, given to each libpt2rt a kernel
 * loads (one, in practice: every kernel links the same libpt2rt.so). */
static _Atomic(void *) half_matmul_kernel;

void pt2SetCpuHalfMatmulKernel(void *fn) { half_matmul_kernel = fn; }

/* pt2SetCpuAtenKernel's, likewise. */
static _Atomic(void *) aten_kernel;

void pt2SetCpuAtenKernel(void *fn) { aten_kernel = fn; }

/* Calls libpt2rt's setter `name` with fn (a function pointer held as a void pointer). */
static void hand_kernel(void *handle, const char *name, void *fn) {
    void *set = dlsym(handle, name);
    if (!set) return; /* a kernel that calls nothing in libpt2rt, or an older libpt2rt */
    void (*set_fn)(void *);
    memcpy(&set_fn, &set, sizeof set_fn);
    set_fn(fn);
}

/* The constants cache of a kernel with frozen inputs that calls libpt2rt. */
static int load_constants(Pt2Kernel *k) {
    if (!k->run || count_frozen(k) == 0) return 0;
    ConstantsCreateFn create = NULL;
    void *syms[3] = {dlsym(k->handle, "pt2rt_constants_create"), dlsym(k->handle, "pt2rt_constants_clear"),
                     dlsym(k->handle, "pt2rt_constants_destroy")};
    if (!syms[0] || !syms[1] || !syms[2]) return 0; /* an older libpt2rt: every call derives its own */
    memcpy(&create, &syms[0], sizeof create);
    memcpy(&k->constants_clear, &syms[1], sizeof k->constants_clear);
    memcpy(&k->constants_destroy, &syms[2], sizeof k->constants_destroy);
    k->frozen_seen = calloc((size_t)count_frozen(k), sizeof(void *));
    k->constants = k->frozen_seen ? create() : NULL;
    if (!k->constants) {
        pt2_set_error("out of memory for a frozen kernel's constants");
        return -1;
    }
    return 0;
}

static int load(Pt2Kernel *k, const char *so_path) {
    k->handle = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!k->handle) {
        pt2_set_error("cannot load compiled kernel %s: %s", so_path, dlerror());
        return -1;
    }
    void *sym = dlsym(k->handle, "pt2_entry");
    if (!sym) {
        pt2_set_error("compiled kernel %s has no pt2_entry", so_path);
        return -1;
    }
    memcpy(&k->entry, &sym, sizeof k->entry);
    /* the libpt2rt the kernel linked against, found among its dependencies; a
     * kernel that calls nothing there (the linker dropped it) reports nothing */
    sym = dlsym(k->handle, "pt2rt_run");
    if (sym) memcpy(&k->run, &sym, sizeof k->run);
    hand_kernel(k->handle, "pt2rtSetHalfMatmulKernel", half_matmul_kernel);
    hand_kernel(k->handle, "pt2rtSetAtenKernel", aten_kernel);
    return load_constants(k);
}

/* One line per cold compile: each phase's wall and CPU seconds (the CPU time of the whole process,
 * so that LLVM's threads count, and other jobs on the machine do not). */
static void log_compile(const char *key, int opt_level, double mlir_wall, double mlir_cpu, const Pt2CodegenTimes *cg,
                        double link_wall) {
    fprintf(stderr,
            "pt2 compile: %.12s: MLIR %.3f s (cpu %.3f), to LLVM IR %.3f s (cpu %.3f), LLVM O%d %.3f s in %d part%s (cpu: opt "
            "%.3f, codegen %.3f), link %.3f s; total %.3f s\n",
            key, mlir_wall, mlir_cpu, cg->translate_wall, cg->translate_cpu, opt_level, cg->llvm_wall, cg->parts,
            cg->parts == 1 ? "" : "s", cg->opt_cpu, cg->codegen_cpu, link_wall,
            mlir_wall + cg->translate_wall + cg->llvm_wall + link_wall);
}

/*===----------------------------------------------------------------------===*
 * pt2CompileText
 *===----------------------------------------------------------------------===*/

static Pt2Kernel *compile_module(MlirContext ctx, MlirOperation module, const char *func_name, const Pt2CompileOptions *opts);

/* pt2-freeze moved what the function computes from frozen inputs alone into
 * @<name>_prologue (`pt2.prologue` names it): taken out of the module into a
 * module of its own, with the options to compile it with (the CPU and GPU
 * paths each compile it as a kernel of theirs, whose results the kernel owns). */
int pt2_kernel_take_prologue(MlirOperation module, MlirOperation func, const Pt2CompileOptions *opts, const char *disable,
                             const char *dump, Pt2CompileOptions *sub, char *dump_buf, size_t dump_cap, MlirModule *out) {
    *out = (MlirModule){NULL};
    MlirAttribute link = mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("pt2.prologue"));
    if (mlirAttributeIsNull(link)) return 0;
    char name[300];
    MlirStringRef ref = mlirFlatSymbolRefAttrGetValue(link);
    snprintf(name, sizeof name, "%.*s", (int)ref.length, ref.data);
    MlirOperation prologue = find_func(module, name);
    if (mlirOperationIsNull(prologue)) {
        located_error(func, "pt2.prologue names @%s, which the module does not define", name);
        return -1;
    }
    *out = mlirModuleCreateEmpty(mlirOperationGetLocation(prologue));
    mlirOperationRemoveFromParent(prologue);
    mlirBlockAppendOwnedOperation(mlirModuleGetBody(*out), prologue);
    pt2CompileOptionsInit(sub);
    if (opts) *sub = *opts;
    sub->disable = disable ? disable : "";
    dump_buf[0] = 0;
    if (dump) snprintf(dump_buf, dump_cap, "%s/prologue", dump);
    sub->dump_dir = dump_buf; /* "": no dump (NULL would read PT2_DUMP again) */
    return 0;
}

static int compile_prologue(MlirContext ctx, MlirOperation module, MlirOperation func, Pt2Kernel *k, const Pt2CompileOptions *opts,
                            const char *disable, const char *dump) {
    Pt2CompileOptions sub;
    char prologue_dump[4200];
    MlirModule own;
    if (pt2_kernel_take_prologue(module, func, opts, disable, dump, &sub, prologue_dump, sizeof prologue_dump, &own) != 0) return -1;
    if (mlirModuleIsNull(own)) return 0;
    k->prologue = compile_module(ctx, mlirModuleGetOperation(own), NULL, &sub);
    mlirModuleDestroy(own);
    if (!k->prologue) return -1;
    k->n_hoisted = k->prologue->n_outputs;
    k->hoisted = calloc((size_t)k->n_hoisted + 1, sizeof(void *));
    for (int j = 0; j < k->n_hoisted; ++j) {
        const Pt2TensorType *t = &k->prologue->types[k->prologue->n_inputs + j];
        size_t bytes = (size_t)pt2_tensor_numel(t) * pt2DTypeSize(t->dtype);
        k->hoisted[j] = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
        if (!k->hoisted[j]) {
            pt2_set_error("out of memory for the %zu bytes of a frozen kernel's prologue result", bytes);
            return -1;
        }
    }
    return 0;
}

static Pt2Kernel *compile_module(MlirContext ctx, MlirOperation module, const char *func_name, const Pt2CompileOptions *opts) {
    double t0 = now_seconds();
    double cpu0 = cpu_seconds();
    Pt2Kernel *k = calloc(1, sizeof *k);
    pthread_mutex_init(&k->prologue_lock, NULL);
    /* verify first: an op's own error says more than the signature's */
    if (pt2VerifyOp(module) != 0) goto error;
    MlirOperation func = find_func(module, func_name);
    if (mlirOperationIsNull(func)) {
        located_error(module, func_name ? "no function @%s in the module" : "no function to compile: the module has no func.func with a body%s", func_name ? func_name : "");
        goto error;
    }
    if (read_signature(func, k) != 0) goto error;
    const char *disable = opts && opts->disable ? opts->disable : getenv("PT2_DISABLE");
    const char *dump = opts && opts->dump_dir ? opts->dump_dir : getenv("PT2_DUMP");
    bool dumping = dump && dump[0];
    if (pt2_disabled(disable, "freezing")) memset(k->frozen, 0, sizeof(bool) * (size_t)k->n_inputs);
    /* the graph-level passes first: the cache key is the module they leave */
    const char *graph_pipeline = pt2GraphPipelineText(disable);
    if (graph_pipeline[0]) {
        /* pt2-run --dump-ir DIR: DIR/graph/; PT2_DUMP=DIR: DIR/NNN-graph/, before the kernel's folder */
        bool named = opts && opts->dump_dir;
        char graph_dump[4200];
        if (dumping) snprintf(graph_dump, sizeof graph_dump, named ? "%s/graph" : "%s", dump);
        if (run_pipeline(ctx, module, graph_pipeline, dumping ? graph_dump : NULL, named ? NULL : "graph", NULL) != 0) {
            if (!pt2GetLastError()[0]) pt2_set_error("the graph passes failed");
            goto error;
        }
    }
    if (compile_prologue(ctx, module, func, k, opts, disable, dumping ? dump : NULL) != 0) goto error;
    Pt2Kernel entry_signature = {0}; /* the function's own, after pt2-freeze */
    int signature_rc = read_signature(func, &entry_signature);
    free(entry_signature.frozen);
    k->entry_types = entry_signature.types;
    if (signature_rc != 0) goto error;
    const char *pipeline = pt2CpuPipelineText(disable);
    int opt_level = opts ? opts->opt_level : 3;
    bool vectorize = !pt2_disabled(disable, "vectorize");
    const char *rt = rt_library();
    if (!rt) goto error;
    /* the cache key: the module without locations, the pipeline, the target */
    char target[4096], key[65], dir[4096], so_path[4300], meta_path[4300];
    target_description(target, sizeof target);
    char *text = pt2_operation_to_text(module, false);
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, PT2_VERSION, strlen(PT2_VERSION) + 1);
    sha256_update(&s, compiler_identity(), strlen(compiler_identity()) + 1);
    sha256_update(&s, text, strlen(text) + 1);
    sha256_update(&s, pipeline, strlen(pipeline) + 1);
    sha256_update(&s, target, strlen(target) + 1);
    sha256_update(&s, func_name ? func_name : "", strlen(func_name ? func_name : "") + 1);
    sha256_update(&s, &opt_level, sizeof opt_level);
    sha256_update(&s, &vectorize, sizeof vectorize);
    /* the passes' tuning variables, read when a kernel compiles */
    static const char *const tuning[] = {"PT2_WELFORD_BYTES",      "PT2_ONLINE_SOFTMAX", "PT2_ONLINE_SOFTMAX_BYTES",
                                         "PT2_PARALLEL_THRESHOLD", "PT2_PARALLEL_ROWS",  "PT2_REPEAT_MIN_UNITS"};
    for (size_t i = 0; i < sizeof tuning / sizeof tuning[0]; ++i) {
        const char *v = getenv(tuning[i]);
        sha256_update(&s, v ? v : "", strlen(v ? v : "") + 1);
    }
    /* the kernel's rpath names libpt2rt's folder */
    sha256_update(&s, rt, strlen(rt) + 1);
    sha256_final_hex(&s, key);
    free(text);
    cache_dir(opts, dir, sizeof dir);
    if (make_private_dir(dir) != 0) {
        pt2_set_error("cannot create the kernel cache directory %s: %s (set PT2_CACHE_DIR)", dir, strerror(errno));
        goto error;
    }
    snprintf(so_path, sizeof so_path, "%s/%s.so", dir, key);
    snprintf(meta_path, sizeof meta_path, "%s/%s.meta", dir, key);
    /* a dump asks to see every stage: compile even if the cache has the kernel */
    if (!dumping && cache_entry_valid(so_path, meta_path, key)) {
        if (load(k, so_path) != 0) goto error;
        k->from_cache = !k->prologue || k->prologue->from_cache;
        set_num_threads(k->handle, opts);
        k->compile_seconds = now_seconds() - t0;
        return k;
    }
    /* compile */
    mlirOperationSetAttributeByName(func, mlirStringRefCreateFromCString("llvm.emit_c_interface"), mlirUnitAttrGet(ctx));
    char dump_dir[4096] = "";
    if (run_pipeline(ctx, module, pipeline, dumping ? dump : NULL, opts && opts->dump_dir ? NULL : key, dump_dir) != 0) {
        if (!pt2GetLastError()[0]) pt2_set_error("the pass pipeline failed");
        goto error;
    }
    char obj_prefix[4400], tmp_so[4400];
    snprintf(obj_prefix, sizeof obj_prefix, "%s/%s.%d", dir, key, (int)getpid());
    snprintf(tmp_so, sizeof tmp_so, "%s/%s.%d.so", dir, key, (int)getpid());
    double mlir_wall = now_seconds() - t0, mlir_cpu = cpu_seconds() - cpu0;
    Pt2CodegenTimes cg;
    int n_objects = pt2_codegen_objects(module, opt_level, vectorize, obj_prefix, dumping ? dump_dir : NULL, &cg);
    if (n_objects < 0) goto error;
    double t_link = now_seconds();
    int linked = link_shared(obj_prefix, n_objects, tmp_so, rt);
    if (pt2_disabled(getenv("PT2_LOGS"), "compile")) log_compile(key, opt_level, mlir_wall, mlir_cpu, &cg, now_seconds() - t_link);
    for (int i = 0; i < n_objects; ++i) {
        char obj[4420];
        snprintf(obj, sizeof obj, "%s.%d.o", obj_prefix, i);
        unlink(obj);
    }
    if (linked != 0) goto error;
    char so_hash[65];
    hash_file(tmp_so, so_hash);
    char tmp_meta[4400];
    snprintf(tmp_meta, sizeof tmp_meta, "%s/%s.%d.meta", dir, key, (int)getpid());
    FILE *f = fopen(tmp_meta, "w");
    if (!f) {
        pt2_set_error("cannot write %s: %s", tmp_meta, strerror(errno));
        goto error;
    }
    fprintf(f, "%s %s %s\n", META_MAGIC, key, so_hash);
    fclose(f);
    chmod(tmp_so, 0600);
    chmod(tmp_meta, 0600);
    /* publish atomically: the .so first, the metadata that vouches for it last */
    if (rename(tmp_so, so_path) != 0 || rename(tmp_meta, meta_path) != 0) {
        pt2_set_error("cannot publish the kernel in %s: %s", dir, strerror(errno));
        goto error;
    }
    if (load(k, so_path) != 0) goto error;
    set_num_threads(k->handle, opts);
    k->compile_seconds = now_seconds() - t0;
    return k;
error:
    pt2KernelDestroy(k);
    return NULL;
}

Pt2Kernel *pt2CompileText(Pt2Context *ctx, const char *mlir_text, const char *source_name, const char *func_name,
                          const Pt2CompileOptions *opts) {
    MlirContext mctx = pt2ContextGetMlir(ctx);
    DiagCollector diags = {{0}, {NULL, 0, 0}};
    diags.buf = (Pt2TextBuf){diags.text, sizeof diags.text, 0};
    pt2_set_error("%s", "");
    MlirDiagnosticHandlerID h = mlirContextAttachDiagnosticHandler(mctx, collect_diag, &diags, NULL);
    MlirOperation module = pt2ParseModule(mctx, mlir_text, source_name);
    Pt2Kernel *k = NULL;
    if (mlirOperationIsNull(module)) {
        pt2_set_error("%s", diags.buf.len ? diags.text : "the module does not parse");
    } else {
        k = compile_module(mctx, module, func_name, opts);
        if (!k && diags.buf.len) pt2_set_error("%s", diags.text);
        mlirOperationDestroy(module);
    }
    mlirContextDetachDiagnosticHandler(mctx, h);
    return k;
}

MlirModule pt2_graph_module(Pt2Graph *g);
Pt2Context *pt2_graph_context(Pt2Graph *g);

Pt2Kernel *pt2CompileGraph(Pt2Graph *g, const Pt2CompileOptions *opts) {
    char *text = pt2GraphToText(g);
    if (!text) return NULL;
    Pt2Kernel *k = pt2CompileText(pt2_graph_context(g), text, "<graph>", NULL, opts);
    free(text);
    return k;
}

void pt2KernelDestroy(Pt2Kernel *k) {
    if (!k) return;
    /* the shared object stays loaded: other kernels of the process may share
     * libpt2rt and its OpenMP runtime, and unloading it while threads idle is unsafe */
    for (int j = 0; k->hoisted && j < k->n_hoisted; ++j) free(k->hoisted[j]);
    free(k->hoisted);
    pt2KernelDestroy(k->prologue);
    if (k->constants) k->constants_destroy(k->constants);
    free(k->frozen_seen);
    pthread_mutex_destroy(&k->prologue_lock);
    free(k->entry_types);
    free(k->frozen);
    free(k->types);
    free(k);
}

/*===----------------------------------------------------------------------===*
 * Shared with the GPU path (runtime/gpu_kernel.c, declared in
 * runtime/kernel_shared.h): the same cache, pipeline runner and signature
 *===----------------------------------------------------------------------===*/

void pt2_kernel_cache_dir(const Pt2CompileOptions *opts, char *out, size_t cap) { cache_dir(opts, out, cap); }
int pt2_kernel_make_private_dir(const char *path) { return make_private_dir(path); }
int pt2_kernel_hash_file(const char *path, char out[65]) { return hash_file(path, out); }
const char *pt2_kernel_compiler_identity(void) { return compiler_identity(); }
MlirOperation pt2_kernel_find_func(MlirOperation module, const char *func_name) { return find_func(module, func_name); }

int pt2_kernel_run_pipeline(MlirContext ctx, MlirOperation module, const char *pipeline, const char *dump_dir,
                            const char *key) {
    return run_pipeline(ctx, module, pipeline, dump_dir, key, NULL);
}

int pt2_kernel_read_signature(MlirOperation func, int *out_inputs, int *out_outputs, Pt2TensorType **out_types) {
    Pt2Kernel k = {0};
    int rc = read_signature(func, &k);
    free(k.frozen);
    if (rc != 0) {
        free(k.types);
        return -1;
    }
    *out_inputs = k.n_inputs;
    *out_outputs = k.n_outputs;
    *out_types = k.types;
    return 0;
}

void *pt2_kernel_diagnostics_begin(MlirContext ctx, uint64_t *out_handler) {
    DiagCollector *d = calloc(1, sizeof *d);
    d->buf = (Pt2TextBuf){d->text, sizeof d->text, 0};
    *out_handler = (uint64_t)mlirContextAttachDiagnosticHandler(ctx, collect_diag, d, NULL);
    return d;
}

const char *pt2_kernel_diagnostics_text(void *diagnostics) {
    DiagCollector *d = diagnostics;
    return d->buf.len ? d->text : "";
}

void pt2_kernel_diagnostics_end(MlirContext ctx, void *diagnostics, uint64_t handler) {
    mlirContextDetachDiagnosticHandler(ctx, (MlirDiagnosticHandlerID)handler);
    free(diagnostics);
}
