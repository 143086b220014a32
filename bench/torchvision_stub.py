"""A stand-in for torchvision where it cannot be installed, so that timm imports.

timm imports torchvision at module level (transforms, datasets, FrozenBatchNorm2d) but none of it
builds or runs the models bench/models.py measures.  The package index of the development machine has
only CUDA builds of torchvision for this torch, whose extension does not load there; bench/models.py
installs this stub only when `import torchvision` fails, and records it in its JSON ("torchvision":
"stub").  Any name imported from the stub is a placeholder class that raises when a model really
uses it; InterpolationMode is a real enum (timm builds tables of it at import).
"""
import enum
import importlib.abc
import importlib.machinery
import sys
import types


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class _Placeholder(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return cls

    def __call__(cls, *args, **kwargs):
        raise RuntimeError(f"torchvision is a stub here (bench/torchvision_stub.py): {cls.__name__} is not available")


def _module_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name == "InterpolationMode":
        return InterpolationMode
    return _Placeholder(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _module_getattr
        return module

    def exec_module(self, module):
        pass


def install():
    """Makes `import torchvision...` resolve to the stub (call only when the real one fails)."""
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _Finder())
