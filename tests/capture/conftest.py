import os
import sys

# The frame-layer test module is a build product: PYTHONPATH=<build>/python
# wins; otherwise the default build directory is tried.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.append(os.path.join(REPO, "build", "python"))
