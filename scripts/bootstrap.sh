#!/bin/sh
# Installs everything pt2 needs on a fresh Debian 12 machine; idempotent.
#   - LLVM/MLIR 22 (C API archives, libMLIR/libLLVM, FileCheck, lit), the LLVM OpenMP runtime
#   - OpenBLAS, its pthread build (libpt2rt's BLAS for f64 and tiny f32 matmuls, see
#     runtime/rt/pt2rt.c)
#   - oneDNN (libpt2rt's f32 matmuls (its sgemm: as fast as MKL here) and f32 convolutions, as
#     eager PyTorch's; see runtime/rt/pt2rt.c and conv.c)
#   - torch 2.13 CPU (the test oracle), pytest, numpy
#   - transformers (real models for `make demo` and the capture tests; optional: skipped if it fails)
# Set PT2_SKIP_BOOTSTRAP=1 to skip (e.g. on a machine prepared by hand).
set -eu
[ "${PT2_SKIP_BOOTSTRAP:-0}" = 1 ] && exit 0
V=${LLVM_VERSION:-22}
PY=${PYTHON:-python3}
need_apt=0
for f in "/usr/lib/llvm-$V/include/mlir-c/IR.h" "/usr/lib/llvm-$V/bin/FileCheck" \
         "/usr/lib/llvm-$V/bin/mlir-opt" \
         /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
         /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so \
         /usr/include/oneapi/dnnl/dnnl.h /usr/lib/x86_64-linux-gnu/libdnnl.so; do
    [ -e "$f" ] || need_apt=1
done
for tool in cmake ninja cc c++; do  # c++: capture/tensor_abi.cpp (and Inductor, for the comparisons)
    command -v $tool >/dev/null 2>&1 || need_apt=1
done
if [ $need_apt = 1 ]; then
    echo "bootstrap: installing LLVM/MLIR $V, OpenBLAS and oneDNN from Debian (GNU OpenMP comes with gcc)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
        "libmlir-$V-dev" "mlir-$V-tools" "llvm-$V-dev" \
        libopenblas-pthread-dev libdnnl-dev cmake ninja-build make gcc g++ >/dev/null
fi
if ! $PY -c 'import torch, pytest, numpy; assert torch.__version__.startswith("2.13")' 2>/dev/null; then
    echo "bootstrap: installing torch 2.13 (CPU), pytest, numpy"
    $PY -m pip install -q torch==2.13.0 pytest numpy
fi
if ! $PY -c 'import expecttest' 2>/dev/null; then
    echo "bootstrap: installing expecttest (PyTorch's OpInfo database needs it: tests/test_gpu_pipeline_opinfo.py)"
    $PY -m pip install -q "expecttest==0.3.0" ||
        echo "bootstrap: expecttest did not install; the OpInfo pipeline test will be skipped"
fi
if ! $PY -c 'import transformers' 2>/dev/null; then
    echo "bootstrap: installing transformers (real models for make demo and the capture tests)"
    $PY -m pip install -q "transformers==5.24.0" ||
        echo "bootstrap: transformers did not install; the model demo and its tests will be skipped"
fi
