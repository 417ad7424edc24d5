"""Stand-ins that let Megatron-LM's argument parser and torchtitan's config
code import on a machine with only an old PyTorch (Debian's 1.13) and none of
their optional packages: every module that is not installed imports as an
empty module whose attributes are empty classes (so `from x import Y` and
`class Z(Y)` work), a few parts of that PyTorch that do not import under this
Python are replaced the same way, names newer PyTorch has resolve to stand-ins,
and the GPU answers as a Hopper (compute capability 9.0). None of this touches
the code that checks arguments: it only lets that code be imported and run.
"""
import importlib.abc, importlib.machinery, sys, types

class _Anything(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        full = self.__name__ + '.' + name
        if full in sys.modules:
            return sys.modules[full]
        return _stub_class(full)

import abc as _abc
class _Meta(_abc.ABCMeta):
    def __new__(mcls, name, bases, ns, **kw):
        return super().__new__(mcls, name, bases, ns)
    def __init__(cls, name, bases, ns, **kw):
        super().__init__(name, bases, ns)
    def __getattr__(cls, item):
        if item.startswith('__'):
            raise AttributeError(item)
        return _stub_class(cls.__qualname__ + '.' + item)
    def __call__(cls, *a, **k):
        return _stub_class(cls.__qualname__ + '()')
    def __getitem__(cls, item):
        return cls
    def __or__(cls, other):
        return cls
    def __ror__(cls, other):
        return cls
    def __bool__(cls):
        return False
    def __iter__(cls):
        return iter(())


def _stub_class(name):
    c = _Meta(name.rsplit('.', 1)[-1], (), {'__init_subclass__': classmethod(lambda cls, **k: None)})
    c.__qualname__ = name
    return c


# Packages whose missing submodules must stay missing: the frameworks whose
# code is checked (DeepSpeed tells a checkout from an installed copy by an
# ImportError), regex (which probes its own package for optional names) and
# annotationlib (a standard module from Python 3.14 on, probed for by DeepSpeed).
_REAL = ('megatron', 'deepspeed', 'regex', 'annotationlib')


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        top = fullname.split('.')[0]
        if top in _REAL or fullname == 'torch' or top in sys.stdlib_module_names or top.startswith('_'):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
    def create_module(self, spec):
        m = _Anything(spec.name)
        m.__version__ = '99.0.0'
        m.__path__ = []
        return m
    def exec_module(self, module):
        pass

sys.meta_path.append(_Finder())

# Parts of the old PyTorch that do not import under this Python (or that the
# parser never needs) are replaced as well.
_FORCED = ('torch.distributed._shard', 'torch.distributed.checkpoint', 'torch.distributed.fsdp',
           'torch.distributed._tensor', 'torch.distributed.tensor', 'torch.distributed._composable',
           'torch.distributed.device_mesh', 'torch._dynamo', 'torch.distributed._symmetric_memory')

class _Forced(_Finder):
    def find_spec(self, fullname, path, target=None):
        if any(fullname == f or fullname.startswith(f + '.') for f in _FORCED):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

sys.meta_path.insert(0, _Forced())

import torch as _torch
for _name in ('float8_e8m0fnu', 'float8_e4m3fn', 'float8_e5m2', 'float8_e4m3fnuz', 'float8_e5m2fnuz',
              'float4_e2m1fn_x2', 'uint16', 'uint32', 'uint64'):
    if not hasattr(_torch, _name):
        setattr(_torch, _name, _torch.uint8)
_torch.jit.script = lambda obj=None, *a, **k: obj

# Names that newer PyTorch has and this one lacks resolve to stand-ins.
def _lenient(mod):
    if mod.__name__.startswith('torch._C'):
        return
    if not hasattr(mod, '__getattr__'):
        mod.__getattr__ = lambda name, _m=mod.__name__: (_ for _ in ()).throw(AttributeError(name)) \
            if name.startswith('__') else _stub_class(_m + '.' + name)

for _m in list(sys.modules.values()):
    if isinstance(_m, types.ModuleType) and _m.__name__.startswith('torch'):
        _lenient(_m)

class _TorchHook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith('torch.'):
            return None
        for f in sys.meta_path:
            if f is self or isinstance(f, _Finder):
                continue
            spec = f.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                inner = spec.loader
                class _L(importlib.abc.Loader):
                    def create_module(self, s):
                        return inner.create_module(s)
                    def exec_module(self, m):
                        inner.exec_module(m)
                        _lenient(m)
                spec.loader = _L()
                return spec
        return None

sys.meta_path.insert(1, _TorchHook())

import typing as _typing
if not hasattr(_typing, 'override'):
    _typing.override = lambda f: f

# The parser asks for the GPU's architecture: answer as a Hopper (sm_90) would.
_torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
_torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
    major=9, minor=0, name='NVIDIA H100 80GB HBM3', total_memory=80 << 30, multi_processor_count=132)
