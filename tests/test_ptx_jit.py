"""runtime/ptx_jit.c: a graph's PTX split into modules of whole entry functions
(compiled on threads with nvJitLink).  No GPU needed: the parts are checked
against the text they came from, with ptxas where CUDA's is installed, and
compiled with nvJitLink where the library is found (PT2_NVJITLINK names it)."""
import ctypes
import os
import re
import shutil
import subprocess
import sys

import pytest

import pt2

HERE = os.path.dirname(__file__)
PT2_OPT = os.path.join(HERE, "..", "build", "bin", "pt2-opt")
sys.path.insert(0, os.path.join(HERE, "..", "test", "lit", "Inputs"))

lib = pt2._core._lib
lib.pt2GpuPtxSplit.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
lib.pt2GpuPtxSplit.restype = ctypes.c_int
lib.pt2GpuPtxCompile.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
lib.pt2GpuPtxCompile.restype = ctypes.c_int

# six reductions and pointwise ops on odd sizes: several kernels in one module
GRAPH = """
func.func @main(%x: tensor<37x129xf32>, %b: tensor<129xf32>) -> tensor<37x129xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %1 = "pt2.softmax"(%0) {dim = 0 : i64} : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %2 = "pt2.add"(%1, %b) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %3 = "pt2.softmax"(%2) {dim = 1 : i64} : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %4 = "pt2.softmax"(%3) {dim = 0 : i64} : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %5 = "pt2.exp"(%4) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %6 = "pt2.softmax"(%5) {dim = 1 : i64} : (tensor<37x129xf32>) -> tensor<37x129xf32>
  return %6 : tensor<37x129xf32>
}
"""

HEADER = "//\n// made by hand\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n\n"


def entry(name, body="\tret;"):
    return f"\t// .globl\t{name}\n.visible .entry {name}(\n\t.param .u64 {name}_p\n)\n{{\n{body}\n}}\n\n"


def split(ptx, max_parts):
    out = ctypes.c_void_p()
    n = lib.pt2GpuPtxSplit(ptx.encode(), max_parts, ctypes.byref(out))
    assert n >= 1
    text = ctypes.string_at(out).decode()
    lib.pt2Free(out)
    parts = text.split("// pt2-part\n")
    assert len(parts) == n
    return parts


def entries(ptx):
    return re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M)


def without_entries(ptx):
    """The module-scope text: what every part repeats."""
    return re.sub(r"^\t// \.globl\t\w+\n|^\.visible \.entry \w+\(.*?^\}\n", "", ptx, flags=re.M | re.S).strip()


def ptxas():
    return shutil.which("ptxas") or next((p for p in ("/usr/local/cuda/bin/ptxas",) if os.path.exists(p)), None)


@pytest.fixture(scope="module")
def graph_ptx():
    if not os.path.exists(PT2_OPT):
        pytest.skip("needs build/bin/pt2-opt")
    env = dict(os.environ, PT2_GPU_PARTS="1")  # one module of every kernel (else one part a processor)
    out = subprocess.run([PT2_OPT, "--pt2-gpu-pipeline", "-"], input=GRAPH, capture_output=True, text=True, check=True, env=env).stdout
    mods = [re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), m.group(1)).rstrip("\0")
            for m in re.finditer(r'assembly = "((?:[^"\\]|\\.)*)"', out)]
    ptx = max(mods, key=lambda t: len(entries(t)))
    assert len(entries(ptx)) >= 4
    return ptx


@pytest.mark.parametrize("max_parts", [1, 2, 3, 16])
def test_split_keeps_every_entry_once(graph_ptx, max_parts, tmp_path):
    parts = split(graph_ptx, max_parts)
    names = entries(graph_ptx)
    assert len(parts) == min(max_parts, len(names))
    seen = [n for p in parts for n in entries(p)]
    assert sorted(seen) == sorted(names)
    for p in parts:
        assert without_entries(p) == without_entries(graph_ptx)
        assert entries(p)
        for name in entries(p):  # each entry's text as it was
            body = re.search(rf"^\.visible \.entry {name}\(.*?^\}}\n", graph_ptx, re.M | re.S).group(0)
            assert body in p
    sizes = [len(p) - len(without_entries(p)) for p in parts]
    assert max(sizes) <= 2 * min(sizes) + max(len(e) for e in re.findall(r"^\.visible \.entry .*?^\}\n", graph_ptx, re.M | re.S))
    tool = ptxas()
    if tool:
        for i, p in enumerate(parts):
            f = tmp_path / f"{i}.ptx"
            f.write_text(p)
            r = subprocess.run([tool, "-arch=sm_90", str(f), "-o", os.devnull], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr


def test_module_scope_declarations_go_to_every_part():
    # a device function defined after the entries that call it, a shared array, a prototype
    proto = ".func (.param .b32 func_retval0) twice(\n\t.param .b32 twice_p\n)\n;\n\n"
    shared = ".shared .align 4 .b8 scratch[128];\n\n"
    func = ".func (.param .b32 func_retval0) twice(\n\t.param .b32 twice_p\n)\n{\n\t.reg .b32 %r<2>;\n\tret;\n}\n"
    ptx = HEADER + proto + shared + entry("a") + entry("b", "\t{\n\t.reg .b32 %x;\n\t}\n\tret;") + entry("c") + func
    parts = split(ptx, 2)
    assert len(parts) == 2
    for p in parts:
        assert p.startswith(HEADER + proto + shared)
        assert func in p and p.index(func) < p.index(".visible .entry")  # defined before any entry
    assert sorted(n for p in parts for n in entries(p)) == ["a", "b", "c"]


def test_assert_strings_go_to_every_part():
    """The constant strings MLIR's cf.assert lowering passes to __assertfail (an index check's
    device-side assert) are module-scope .globals no kernel writes: every part gets a copy."""
    decl = (".extern .func __assertfail\n(\n\t.param .b64 __assertfail_param_0,\n\t.param .b64 __assertfail_param_1,\n"
            "\t.param .b32 __assertfail_param_2,\n\t.param .b64 __assertfail_param_3,\n\t.param .b64 __assertfail_param_4\n)\n"
            ".noreturn;\n.global .align 1 .b8 assert_message_0[3] = {104, 105};\n"
            ".global .align 1 .b8 assert_file_0[10] = {40, 117, 110, 107, 110, 111, 119, 110, 41};\n\n")
    ptx = HEADER + decl + entry("a") + entry("b")
    parts = split(ptx, 2)
    assert len(parts) == 2 and all(p.startswith(HEADER + decl) for p in parts)
    assert split(HEADER + ".global .align 1 .b8 other_0[3] = {104, 105};\n\n" + entry("a") + entry("b"), 2) == [
        HEADER + ".global .align 1 .b8 other_0[3] = {104, 105};\n\n" + entry("a") + entry("b")]


@pytest.mark.parametrize("why", ["global", "one entry", "unbalanced"])
def test_text_kept_whole(why):
    if why == "global":
        ptx = HEADER + ".global .align 4 .u32 counter;\n\n" + entry("a") + entry("b")
    elif why == "one entry":
        ptx = HEADER + entry("a")
    else:
        ptx = HEADER + entry("a") + entry("b").replace("}\n", "", 1)
    assert split(ptx, 8) == [ptx]


def test_nvjitlink_compiles_the_parts(graph_ptx):
    n_bytes = ctypes.c_size_t()
    n = lib.pt2GpuPtxCompile(graph_ptx.encode(), 90, 3, ctypes.byref(n_bytes))
    if n < 0:
        msg = lib.pt2GetLastError().decode()
        if "no libnvJitLink" in msg:
            pytest.skip("no libnvJitLink here (PT2_NVJITLINK names one)")
        pytest.fail(msg)
    assert n == 3 and n_bytes.value > 0
    assert lib.pt2GpuPtxCompile(HEADER.encode() + b".visible .entry bad(\n)\n{\n\tnot_an_instruction;\n}\n", 90, 1, ctypes.byref(n_bytes)) == -1
    assert "nvJitLink" in lib.pt2GetLastError().decode()
