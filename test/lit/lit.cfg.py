# lit configuration for pt2's IR tests.
import os
import lit.formats

config.name = "pt2"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "Inputs"]

pt2_bin = lit_config.params.get("pt2_bin", os.path.join(config.test_source_root, "..", "..", "build", "bin"))
llvm_bin = lit_config.params.get("llvm_bin", "/usr/lib/llvm-22/bin")
config.environment["PATH"] = os.pathsep.join([pt2_bin, llvm_bin, config.environment.get("PATH", os.environ["PATH"])])
# the GPU pipeline deals kernels into one part per processor: one part, whatever the machine
config.environment["PT2_GPU_PARTS"] = "1"
config.environment["PT2_CACHE_DIR"] = os.path.join(os.path.dirname(pt2_bin), "lit-cache")
# Test outputs (%t) and lit's timing file go to the build directory, not the
# source tree, so that running the suite leaves the checkout clean.
config.test_exec_root = os.path.join(os.path.dirname(pt2_bin), "lit-out")
