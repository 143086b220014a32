import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
# Tests compile into a private cache so they never depend on (or pollute) the user's.
os.environ.setdefault("PT2_CACHE_DIR", os.path.join(HERE, "..", "build", "test-cache"))
