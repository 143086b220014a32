"""libpt2rt's run and index reports (runtime/rt/run.c), called directly: pt2rt_run gives its status the
first report of the run and nothing of another thread's run; on x86-64, pt2rt_index_error (an assembly
trampoline the kernels call as "no_caller_saved_registers") leaves every register as it found it."""
import ctypes
import os
import platform
import shutil
import subprocess
import threading

import pytest

from rt_ctypes import rt_library

ENTRY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))


class Status(ctypes.Structure):  # Pt2rtRunStatus (runtime/rt/pt2rt.h)
    _fields_ = [("failed", ctypes.c_int32), ("error", ctypes.c_int32), ("value", ctypes.c_int64),
                ("size", ctypes.c_int64), ("dim", ctypes.c_int64)]


@pytest.fixture(scope="module")
def rt():
    lib = ctypes.CDLL(rt_library())
    lib.pt2rt_run.argtypes = [ENTRY, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Status)]
    lib.pt2rt_index_error.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32]
    return lib


def run(rt, reports):
    """pt2rt_run of an entry that reports each (value, size, dim, error) in turn; the status."""
    status = Status()

    @ENTRY
    def entry(argv):
        for r in reports:
            rt.pt2rt_index_error(*r)

    rt.pt2rt_run(entry, None, ctypes.byref(status))
    return status


def test_the_first_report_of_a_run_is_kept(rt):
    s = run(rt, [(7, 5, 0, 0), (-9, 3, 1, 2)])
    assert (s.failed, s.value, s.size, s.dim, s.error) == (1, 7, 5, 0, 0)
    s = run(rt, [])
    assert s.failed == 0


def test_a_report_outside_a_run_goes_nowhere(rt):
    rt.pt2rt_index_error(1, 2, 3, 0)  # no run: nothing to record, nothing breaks
    assert run(rt, []).failed == 0


def test_runs_on_two_threads_keep_their_own_reports(rt):
    results = {}

    def worker(name, reports):
        results[name] = [run(rt, reports) for _ in range(200)]

    threads = [threading.Thread(target=worker, args=("bad", [(11, 4, 2, 1)])), threading.Thread(target=worker, args=("good", []))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s.failed == 0 for s in results["good"])
    assert all((s.failed, s.value, s.size, s.dim, s.error) == (1, 11, 4, 2, 1) for s in results["bad"])


# Loads a pattern into every vector register (zmm0-31 with AVX-512, else ymm0-15 or xmm0-15), opmask
# registers and the general registers a SysV callee may clobber, calls pt2rt_index_error inside a run, and
# stores them all back: what comes back must be the pattern (and the report recorded).
HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct { int32_t failed, error; int64_t value, size, dim; } Status;
void pt2rt_run(void (*entry)(void **), void **argv, Status *status);
void pt2rt_index_error(int64_t value, int64_t size, int64_t dim, int32_t error);

#define L16(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#define L32(M) L16(M) M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31)
#define ZIN(i) "vmovdqu64 " #i "*64(%%r12), %%zmm" #i "\n"
#define ZOUT(i) "vmovdqu64 %%zmm" #i ", " #i "*64(%%r13)\n"
#define YIN(i) "vmovdqu " #i "*64(%%r12), %%ymm" #i "\n"
#define YOUT(i) "vmovdqu %%ymm" #i ", " #i "*64(%%r13)\n"
#define XIN(i) "movdqu " #i "*64(%%r12), %%xmm" #i "\n"
#define XOUT(i) "movdqu %%xmm" #i ", " #i "*64(%%r13)\n"
#define GPRS_IN "mov 0(%%r14), %%rax\n mov 8(%%r14), %%r8\n mov 16(%%r14), %%r9\n mov 24(%%r14), %%r10\n mov 32(%%r14), %%r11\n"
#define GPRS_OUT "mov %%rax, 0(%%r15)\n mov %%r8, 8(%%r15)\n mov %%r9, 16(%%r15)\n mov %%r10, 24(%%r15)\n mov %%r11, 32(%%r15)\n" \
                 "mov %%rdi, 40(%%r15)\n mov %%rsi, 48(%%r15)\n mov %%rdx, 56(%%r15)\n mov %%rcx, 64(%%r15)\n"
#define ARGS "mov $7, %%rdi\n mov $5, %%rsi\n mov $1, %%rdx\n mov $2, %%rcx\n"
#define CLOBBERS "memory", "cc", "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"
#define XMM16 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
              "xmm12", "xmm13", "xmm14", "xmm15"
#define OPERANDS "r"(pin), "r"(pout), "r"(pg), "r"(pgo)
#define POINTERS register unsigned char *pin asm("r12") = in; register unsigned char *pout asm("r13") = out; \
                 register uint64_t *pg asm("r14") = gin; register uint64_t *pgo asm("r15") = gout;

static unsigned char in[32 * 64] __attribute__((aligned(64))), out[32 * 64] __attribute__((aligned(64)));
static uint64_t gin[5] = {0x1111, 0x2222, 0x3333, 0x4444, 0x5555}, gout[9];
static uint16_t masks[16]; /* k1, k2, k7 loaded from [1], [2], [7], stored to [9], [10], [15] */
static int width;

__attribute__((target("avx512f"))) static void call_512(void) {
    POINTERS
    register uint16_t *pk asm("rbx") = masks;
    __asm__ volatile("kmovw 2(%%rbx), %%k1\n kmovw 4(%%rbx), %%k2\n kmovw 14(%%rbx), %%k7\n" L32(ZIN) GPRS_IN ARGS
                     "call pt2rt_index_error\n" GPRS_OUT L32(ZOUT)
                     "kmovw %%k1, 18(%%rbx)\n kmovw %%k2, 20(%%rbx)\n kmovw %%k7, 30(%%rbx)\n"
                     : : OPERANDS, "r"(pk)
                     : CLOBBERS, "k1", "k2", "k7", XMM16, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
                       "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}

__attribute__((target("avx"))) static void call_256(void) {
    POINTERS
    __asm__ volatile(L16(YIN) GPRS_IN ARGS "call pt2rt_index_error\n" GPRS_OUT L16(YOUT)
                     : : OPERANDS : CLOBBERS, XMM16);
}

static void call_128(void) {
    POINTERS
    __asm__ volatile(L16(XIN) GPRS_IN ARGS "call pt2rt_index_error\n" GPRS_OUT L16(XOUT)
                     : : OPERANDS : CLOBBERS, XMM16);
}

static void entry(void **argv) {
    (void)argv;
    if (width == 512) call_512();
    else if (width == 256) call_256();
    else call_128();
}

int main(void) {
    width = __builtin_cpu_supports("avx512f") ? 512 : __builtin_cpu_supports("avx") ? 256 : 128;
    for (int i = 0; i < (int)sizeof in; ++i) in[i] = (unsigned char)(i * 7 + 3);
    for (int i = 0; i < 8; ++i) masks[i] = (uint16_t)(0x1357 * (i + 1));
    Status s = {0};
    pt2rt_run(entry, NULL, &s);
    int regs = width == 512 ? 32 : 16, bytes = width / 8, bad = 0;
    for (int r = 0; r < regs; ++r) bad += memcmp(in + 64 * r, out + 64 * r, (size_t)bytes) != 0;
    for (int i = 0; i < 5; ++i) bad += gin[i] != gout[i];
    bad += gout[5] != 7 || gout[6] != 5 || gout[7] != 1 || gout[8] != 2; /* the arguments too */
    if (width == 512) bad += masks[1] != masks[9] || masks[2] != masks[10] || masks[7] != masks[15];
    printf("width %d, registers changed %d, report %d %lld %lld %lld %d\n", width, bad, s.failed, (long long)s.value,
           (long long)s.size, (long long)s.dim, s.error);
    return bad != 0 || !s.failed || s.value != 7 || s.size != 5 || s.dim != 1 || s.error != 2;
}
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the trampoline is x86-64's")
@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_index_error_preserves_every_register(tmp_path):
    source, exe = tmp_path / "harness.c", tmp_path / "harness"
    source.write_text(HARNESS)
    lib = rt_library()
    # bound at load (-z now), as runtime/kernel.c loads kernels (RTLD_NOW): lazy binding may change r10, r11
    subprocess.run(["cc", "-O1", "-mno-red-zone", "-Wl,-z,now", "-o", str(exe), str(source), lib,
                    f"-Wl,-rpath,{os.path.dirname(lib)}"], check=True, capture_output=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
