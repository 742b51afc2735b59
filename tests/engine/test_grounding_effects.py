"""The grounding allowance judges an added module-level statement by what it does when the module is imported
(search.engine.effects), not by its shape: a corpus of leaks that look like new definitions but rebind, patch or
shadow what the skeleton's fixed lines use, or run code at import, each rejected naming its line and the reason;
and the helpers a kernel candidate legitimately adds (an extension build, Triton kernels, constants) still pass."""

from __future__ import annotations

import pytest

from search.engine.anchors import AnchorError, apply_fills, wrap_lines
from search.engine.grounding import align, check_filled

SOURCE = '''import inspect
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


class ModelNew(Model):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 16)]
'''
SKELETON = wrap_lines(SOURCE, [(19, 19, "call a fused kernel")])
FILL = "        return relu_fast(x)"
BEFORE_MODELNEW = "\n\nclass ModelNew"
BEFORE_GET_INPUTS = "\n\ndef get_inputs"

# (what is added, where, the reason the re-ask gives, the line it names)
LEAKS = [
    pytest.param("def _new_init(self):\n    nn.Module.__init__(self)\n\n\n"
                 "_patch = setattr(ModelNew, '__init__', _new_init)\n", BEFORE_GET_INPUTS,
                 "calls setattr(...) on the right of the assignment when the module is imported",
                 "_patch = setattr(ModelNew, '__init__', _new_init)", id="setattr-patch"),
    pytest.param("def super():\n    return object\n", BEFORE_MODELNEW,
                 "shadows the builtin 'super', which the skeleton's fixed lines use", "def super():",
                 id="builtin-shadow"),
    pytest.param("class Helper:\n    setattr(Model, 'forward', lambda self, x: x)\n", BEFORE_MODELNEW,
                 "runs in the body of class 'Helper' when the module is imported",
                 "setattr(Model, 'forward', lambda self, x: x)", id="class-body"),
    pytest.param("@print\ndef relu_fast(x):\n    return x.clamp_min(0)\n", BEFORE_MODELNEW,
                 "decorates 'relu_fast' with @print, which runs when the module is imported", "@print",
                 id="decorator"),
    pytest.param("def relu_fast(x, _p=setattr(Model, 'forward', None)):\n    return x\n", BEFORE_MODELNEW,
                 "calls setattr(...) in a default argument", "def relu_fast(x, _p=setattr(", id="default-argument"),
    pytest.param("_ = exec('Model.forward = lambda self, x: x')\n", BEFORE_GET_INPUTS,
                 "calls exec(...) on the right of the assignment", "_ = exec(", id="exec"),
    pytest.param("class Helper:\n    _x = print('imported')\n", BEFORE_MODELNEW,
                 "calls print(...) on the right of the assignment in class 'Helper'", "_x = print(",
                 id="class-body-assignment"),
    pytest.param("import os as super\n", BEFORE_MODELNEW, "shadows the builtin 'super'", "import os as super",
                 id="import-shadow"),
    pytest.param("from os.path import *\n", BEFORE_MODELNEW, "imports * (names that cannot be checked)",
                 "from os.path import *", id="star-import"),
    pytest.param("def __getattr__(name):\n    return None\n", BEFORE_MODELNEW,
                 "binds '__getattr__', a module-level dunder", "def __getattr__(name):", id="module-dunder"),
    pytest.param("class Meta(type):\n    pass\n\n\nclass Helper(metaclass=Meta):\n    pass\n", BEFORE_MODELNEW,
                 "gives class 'Helper' a metaclass=...", "class Helper(metaclass=Meta):", id="metaclass"),
    pytest.param("class Base:\n    def __init_subclass__(cls):\n        cls.forward = None\n\n\n"
                 "class Helper(Base):\n    pass\n", BEFORE_MODELNEW,
                 "defines __init_subclass__ in class 'Base'", "def __init_subclass__(cls):", id="subclass-hook"),
    pytest.param("X = (Y := 3)\n", BEFORE_MODELNEW, "assigns with := on the right of the assignment", "X = (Y := 3)",
                 id="walrus"),
    pytest.param("X: print('a') = 1\n", BEFORE_MODELNEW, "calls print(...) in an annotation", "X: print('a') = 1",
                 id="annotation"),
    pytest.param("relu_fast = lambda x, _=exec('1'): x\n", BEFORE_MODELNEW,
                 "calls exec(...) in a lambda's default argument", "relu_fast = lambda", id="lambda-default"),
    pytest.param("_T = [setattr(Model, 'a', i) for i in range(2)]\n", BEFORE_MODELNEW,
                 "calls setattr(...) on the right of the assignment", "_T = [setattr(", id="comprehension"),
    pytest.param("@torch.compile(mode=print('x'))\ndef relu_fast(x):\n    return x\n", BEFORE_MODELNEW,
                 "calls print(...) in the arguments of @torch.compile", "@torch.compile(mode=print('x'))",
                 id="decorator-arguments"),
    pytest.param("def load_inline(**kw):\n    return setattr(Model, 'forward', None)\n\n\n"
                 "relu_fast = load_inline(name='x')\n", BEFORE_MODELNEW,
                 "calls load_inline(...) on the right of the assignment", "relu_fast = load_inline(name='x')",
                 id="fake-builder"),
    pytest.param("inspect = None\n", BEFORE_MODELNEW, "rebinds 'inspect', which the skeleton already binds",
                 "inspect = None", id="rebind-import"),
    pytest.param("@torch.library.custom_op('aten::relu_fast', mutates_args=())\ndef relu_fast(x):\n    return x\n",
                 BEFORE_MODELNEW, "for 'aten::relu_fast', in torch's own namespace 'aten'",
                 "@torch.library.custom_op('aten::relu_fast'", id="custom-op-torch-namespace"),
    pytest.param("@torch.library.register_kernel('aten::relu', 'cpu')\ndef relu_fast(x):\n    return x\n",
                 BEFORE_MODELNEW, "in torch's own namespace 'aten'", "@torch.library.register_kernel('aten::relu'",
                 id="kernel-for-a-torch-operator"),
    pytest.param("@torch.library.register_fake('other::relu')\ndef relu_fast(x):\n    return x\n",
                 BEFORE_MODELNEW, "registers a kernel for 'other::relu', an operator the added code does not define",
                 "@torch.library.register_fake('other::relu')", id="kernel-for-an-operator-not-defined-here"),
    pytest.param("_NAME = 'mylib::relu'\n\n\n@torch.library.custom_op(_NAME, mutates_args=())\n"
                 "def relu_fast(x):\n    return x\n", BEFORE_MODELNEW,
                 "without a literal operator name 'namespace::name'", "@torch.library.custom_op(_NAME",
                 id="custom-op-unnamed"),
    pytest.param("@torch.library.custom_op('mylib::relu', mutates_args=print('x'))\ndef relu_fast(x):\n    return x\n",
                 BEFORE_MODELNEW, "calls print(...) in the arguments of torch.library.custom_op",
                 "@torch.library.custom_op('mylib::relu', mutates_args=print('x'))", id="custom-op-arguments"),
]


def filled_with(insert: str, at: str) -> str:
    return apply_fills(SKELETON.replace(at, "\n\n" + insert + at, 1), [FILL])


@pytest.mark.parametrize("insert, at, why, line", LEAKS)
def test_a_leak_is_rejected_naming_its_line_and_what_it_does(insert: str, at: str, why: str, line: str) -> None:
    filled = filled_with(insert, at)
    with pytest.raises(AnchorError) as info:
        check_filled(SKELETON, filled)
    message = str(info.value)
    assert why in message
    number = next(no for no, text in enumerate(filled.splitlines(), start=1) if text.strip().startswith(line))
    assert f"line {number} '{line}" in message or f'line {number} "{line}' in message, message
    assert "may only define new names" in message


LEGITIMATE = '''
from torch.utils.cpp_extension import load_inline
import triton
import triton.language as tl

CUDA_SOURCE = r"""
__global__ void relu_kernel(const float* x, float* y, int n) { }
"""
relu_ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                       cuda_sources=CUDA_SOURCE, functions=["relu"], extra_cuda_cflags=["-O3"], verbose=False)
_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 1024)]
_LAYOUTS = {4: torch.channels_last}
_FLAGS = tuple(inspect.signature(torch.backends.cudnn.flags).parameters)
BLOCK: int = 1024
"""A module-level note."""


@triton.autotune(configs=_CONFIGS, key=["n"])
@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    setattr(Model, "never", "a function body runs only when a span calls it")


def relu_fast(x: torch.Tensor, block: int = BLOCK * 2, scale=-1.0) -> torch.Tensor:
    out = torch.empty_like(x)
    _relu_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel())
    return out


class Launcher(nn.Module):
    """Holds the grid."""

    WARPS = 4

    @staticmethod
    def grid(n, block=1024):
        return (triton.cdiv(n, block),)
'''


def test_a_legitimate_helper_still_passes_and_is_recorded() -> None:
    result = check_filled(SKELETON, filled_with(LEGITIMATE.lstrip("\n"), BEFORE_MODELNEW))
    assert len(result.allowed) == 1
    assert result.allowed[0].names == ["load_inline", "triton", "tl", "CUDA_SOURCE", "relu_ext", "_CONFIGS",
                                       "_LAYOUTS", "_FLAGS", "BLOCK", "_relu_kernel", "relu_fast", "Launcher"]
    assert "new import + assignment + comment + function + class" in result.summary()


CUSTOM_OP = '''
@torch.library.custom_op("stark_relu::relu", mutates_args=())
def relu_fast(x: torch.Tensor) -> torch.Tensor:
    return x.clamp_min(0)


@relu_fast.register_fake
def _(x):
    return torch.empty_like(x)


@relu_fast.register_kernel("cuda")
def _relu_cuda(x):
    return x.clamp_min(0)


def _relu_scaled_impl(x: torch.Tensor) -> torch.Tensor:
    return x.clamp_min(0) * 2


relu_scaled = torch.library.custom_op("stark_relu::relu_scaled", _relu_scaled_impl, mutates_args=())


@torch.library.register_fake("stark_relu::relu_scaled")
def _relu_scaled_fake(x):
    return torch.empty_like(x)
'''


def test_an_operator_defined_through_torch_library_passes_like_an_extension_build() -> None:
    result = check_filled(SKELETON, filled_with(CUSTOM_OP.lstrip("\n"), BEFORE_MODELNEW))
    assert len(result.allowed) == 1
    assert result.allowed[0].names == ["relu_fast", "_", "_relu_cuda", "_relu_scaled_impl", "relu_scaled",
                                       "_relu_scaled_fake"]


def test_a_name_used_only_inside_a_span_may_be_defined() -> None:
    # `y` is a local of the span's old body, not of the fixed lines: a new constant `y` shadows nothing they use.
    skeleton = wrap_lines(SOURCE.replace("        return torch.relu(x)\n\n\ndef",
                                         "        y = torch.relu(x)\n        return y\n\n\ndef"), [(19, 20, "fuse")])
    filled = apply_fills(skeleton.replace(BEFORE_MODELNEW, "\n\ny = 2.0\n" + BEFORE_MODELNEW, 1),
                         ["        return relu_fast(x) * y"])
    assert align(skeleton, filled).violations == []
