"""Index bounds (passes/value_range.c) on CUDA: the random index expressions of
tests/capture/test_capture_index_proven.py (aranges, sorts, clamps, remainders, wheres, float round trips
over random integers) compiled for the GPU, against eager CUDA.  Only those whose every index is in range
run here (decided by eager on the CPU first): an index out of range fails a device-side assert, which ends
the process's CUDA context (tests/gpu/test_gpu_index_checks.py runs those in processes of their own).  A
bound that wrongly dropped a check cannot show here; a bound that changed a kernel's arithmetic would.
Here k's values are distinct (CUDA's sort orders equal keys its own way, pt2's stably) and the aranges,
fills and tensors are made on k's device (eager refuses a CUDA k plus a CPU arange: the first run on the
H100, at 49e38e6, compared those failures)."""
import os
import random
import re
import sys

import pytest
import torch

import pt2
from pt2 import _gpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "capture"))
from test_capture_index_proven import _expression  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and _gpu.cuda_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


@needs_cuda
@pytest.mark.parametrize("seed", range(60))
def test_random_index_expressions_on_cuda(seed):
    rng = random.Random(seed)
    src = _expression(rng, rng.randint(1, 3))
    src = re.sub(r"torch\.(arange|full|tensor)\(((?:[^()]|\([^()]*\))*)\)", r"torch.\1(\2, device=k.device)", src)
    fn = eval("lambda k, x: x[%s]" % src, {"torch": torch})
    k = torch.randperm(40, generator=torch.Generator().manual_seed(seed))[:12] - 20
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(seed + 1))
    try:
        fn(k, x)
    except (IndexError, RuntimeError):
        pytest.skip("an index out of range: a device-side assert would end the CUDA context")
    kc, xc = k.cuda(), x.cuda()
    with torch.no_grad():
        want = fn(kc, xc)
        pt2.reset()
        got = pt2.compile(fn)(kc, xc)
    assert got.device == want.device and got.shape == want.shape, (src, got.shape, want.shape)
    assert torch.equal(got, want), src
