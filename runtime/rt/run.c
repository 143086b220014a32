/*===- run.c - libpt2rt: a kernel's run and the index errors it reports -----===*
 *
 * A kernel cannot raise: pt2-lower's index checks (passes/lower.c) clamp an
 * index out of range and call pt2rt_index_error on that branch, which
 * records the first such report of the run in the caller's Pt2rtRunStatus;
 * runtime/kernel.c turns it into the error eager PyTorch raises once the
 * run is over.  The status is found through a thread-local pointer that
 * pt2rt_run sets on the calling thread and __kmpc_fork_call (kmpc.c) copies
 * to every member of the teams the kernel forks, so that concurrent runs (two
 * Python threads calling compiled code) never see each other's reports.
 *
 * On x86-64, pt2rt_index_error preserves every register (the kernels declare
 * it "no_caller_saved_registers"): a call on a cold branch would otherwise
 * make LLVM keep no vector value in a register across it, and a gathered
 * row summed after its check was spilled and reloaded, 16 zmm registers a
 * row, on the hot path (0.04 -> 0.07 ms).  A trampoline saves the general
 * registers the ABI lets a callee clobber and the whole vector state
 * (xsave: x87, SSE, AVX, AVX-512's masks and upper registers), then calls
 * the C function that records the report.  (Kernels are loaded with
 * RTLD_NOW: no lazy binding, which may change r10 and r11, runs on the call.)
 *===----------------------------------------------------------------------===*/
#include "internal.h"

_Thread_local Pt2rtRunStatus *pt2rt_current_run;

PT2RT_EXPORT void pt2rt_run(void (*entry)(void **), void **argv, Pt2rtRunStatus *status) {
    Pt2rtRunStatus *outer = pt2rt_current_run; /* a kernel's run never nests today; restoring costs nothing */
    pt2rt_current_run = status;
    entry(argv);
    pt2rt_current_run = outer;
}

Pt2rtRunStatus *pt2rt_claim_status(void) {
    Pt2rtRunStatus *status = pt2rt_current_run;
    if (!status) return NULL;
    /* the first reporter claims the status; the team's join orders its
     * writes before the caller reads them */
    int32_t unclaimed = 0;
    return __atomic_compare_exchange_n(&status->failed, &unclaimed, 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED) ? status : NULL;
}

/* What pt2rt_index_error does, called with the caller's registers saved. */
void pt2rt_index_error_record(int64_t value, int64_t size, int64_t dim, int32_t error) {
    Pt2rtRunStatus *status = pt2rt_claim_status();
    if (!status) return;
    status->error = error;
    status->value = value;
    status->size = size;
    status->dim = dim;
}

#if defined(__x86_64__)

/* Whether the OS saves the extended state (CPUID.1:ECX.OSXSAVE): xsave then,
 * else the SSE state alone with fxsave (a CPU without AVX has no more). */
int pt2rt_have_xsave;

__attribute__((constructor)) static void detect_xsave(void) {
    unsigned eax = 1, ebx, ecx, edx;
    __asm__("cpuid" : "+a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx));
    pt2rt_have_xsave = (ecx >> 27) & 1;
}

/* The registers a SysV callee may clobber, pushed (rax rcx rdx rsi rdi r8-r11),
 * then the vector state in a 64-byte aligned area of 2752 bytes (xsave's
 * standard form up to AVX-512's Hi16_ZMM ends at 2688; its header zeroed, as
 * xrstor requires), with the mask 0xE7: x87, SSE, AVX, opmask, ZMM_Hi256,
 * Hi16_ZMM (not MPX, not AMX's tiles).  The arguments stay where the call put
 * them but rdx and rcx, which xsave's mask uses, reloaded from their pushes. */
__asm__(".text\n"
        ".globl pt2rt_index_error\n"
        ".type pt2rt_index_error, @function\n"
        "pt2rt_index_error:\n"
        "    .cfi_startproc\n"
        "    endbr64\n"
        "    pushq %rbp\n"
        "    .cfi_def_cfa_offset 16\n"
        "    .cfi_offset %rbp, -16\n"
        "    movq %rsp, %rbp\n"
        "    .cfi_def_cfa_register %rbp\n"
        "    pushq %rax\n"
        "    pushq %rcx\n"
        "    pushq %rdx\n"
        "    pushq %rsi\n"
        "    pushq %rdi\n"
        "    pushq %r8\n"
        "    pushq %r9\n"
        "    pushq %r10\n"
        "    pushq %r11\n"
        "    subq $2752, %rsp\n"
        "    andq $-64, %rsp\n"
        "    cmpl $0, pt2rt_have_xsave(%rip)\n"
        "    je 1f\n"
        "    xorl %eax, %eax\n"
        "    movq %rax, 512(%rsp)\n"
        "    movq %rax, 520(%rsp)\n"
        "    movq %rax, 528(%rsp)\n"
        "    movq %rax, 536(%rsp)\n"
        "    movq %rax, 544(%rsp)\n"
        "    movq %rax, 552(%rsp)\n"
        "    movq %rax, 560(%rsp)\n"
        "    movq %rax, 568(%rsp)\n"
        "    xorl %edx, %edx\n"
        "    movl $0xE7, %eax\n"
        "    xsave64 (%rsp)\n"
        "    jmp 2f\n"
        "1:  fxsave64 (%rsp)\n"
        "2:  movq -24(%rbp), %rdx\n"
        "    movq -16(%rbp), %rcx\n"
        "    call pt2rt_index_error_record\n"
        "    cmpl $0, pt2rt_have_xsave(%rip)\n"
        "    je 3f\n"
        "    xorl %edx, %edx\n"
        "    movl $0xE7, %eax\n"
        "    xrstor64 (%rsp)\n"
        "    jmp 4f\n"
        "3:  fxrstor64 (%rsp)\n"
        "4:  leaq -72(%rbp), %rsp\n"
        "    popq %r11\n"
        "    popq %r10\n"
        "    popq %r9\n"
        "    popq %r8\n"
        "    popq %rdi\n"
        "    popq %rsi\n"
        "    popq %rdx\n"
        "    popq %rcx\n"
        "    popq %rax\n"
        "    popq %rbp\n"
        "    .cfi_def_cfa %rsp, 8\n"
        "    ret\n"
        "    .cfi_endproc\n"
        ".size pt2rt_index_error, .-pt2rt_index_error\n");

#else

PT2RT_EXPORT void pt2rt_index_error(int64_t value, int64_t size, int64_t dim, int32_t error) {
    pt2rt_index_error_record(value, size, dim, error);
}

#endif
