"""One pass over a candidate's source with Python's ast, for search.engine.win_class: what it imports, the
strings it builds kernels from, its extensions and Triton kernels, ModelNew, what forward reaches, and what it
configures. The source is untrusted and is never imported or run. Pure: no Django, no torch."""

from __future__ import annotations

import ast
import re

EXT_BUILDERS = ("torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load")
TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")
CUDA_WORK = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.|__syncthreads\s*\(|__shared__\s|atomic\w+\s*\(")
CPP_LOOP = re.compile(r"\bfor\s*\(|\bwhile\s*\(|parallel_for\b")
C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
# Configuration, by the qualified name a call or attribute starts with (the label the reasons show).
CONFIG_PREFIXES = (
    ("torch.compile", "torch.compile"), ("torch._dynamo.optimize", "torch.compile"),
    ("torch.jit.script", "TorchScript"), ("torch.jit.trace", "TorchScript"), ("torch.jit.freeze", "TorchScript"),
    ("torch.cuda.graph", "CUDA graphs"), ("torch.cuda.CUDAGraph", "CUDA graphs"),
    ("torch.cuda.make_graphed_callables", "CUDA graphs"),
    ("torch.backends.cuda.matmul.allow_tf32", "TF32"), ("torch.backends.cudnn.allow_tf32", "TF32"),
    ("torch.set_float32_matmul_precision", "TF32"), ("torch.backends.cudnn", "cuDNN flags"),
    ("torch.backends", "torch.backends flags"), ("torch.channels_last", "channels_last layout"),
    ("torch.autocast", "autocast"), ("torch.cuda.amp.autocast", "autocast"), ("torch.amp.autocast", "autocast"),
)
# Compute ops that, reached from forward, mean PyTorch still does some of the work (KernelBench warns on these).
TORCH_COMPUTE = re.compile(r"^torch\.(nn\.functional\.\w+|(mm|bmm|matmul|einsum|addmm|_addmm_activation|baddbmm|"
                           r"conv\w*|linear|\w*pool\w*|\w*norm\w*|softmax|log_softmax|cumsum|logsumexp))$")


def _text_of(node: ast.AST | None, strings: dict[str, str], depth: int = 0) -> str:
    """The text of a string expression: constants, names of module strings, +, f-strings, lists of them."""
    if node is None or depth > 8:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return strings.get(node.id, "")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text_of(node.left, strings, depth + 1) + _text_of(node.right, strings, depth + 1)
    if isinstance(node, ast.JoinedStr):
        return "".join(_text_of(v, strings, depth + 1) for v in node.values)
    if isinstance(node, (ast.List, ast.Tuple)):
        return "\n".join(_text_of(v, strings, depth + 1) for v in node.elts)
    return ""


class SourceScan:
    """One parse of a candidate: imports, strings, extensions, Triton kernels, ModelNew and what forward reaches."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        self.aliases[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                text = _text_of(stmt.value, self.strings)
                if text:
                    self.strings[stmt.targets[0].id] = text
        self.notes: list[str] = []
        self.triton = {name for name, f in self.functions.items() if self._is_triton_kernel(f)}
        self.ext_names: dict[str, str] = {}  # extension module name (or "self.attr") -> what its source holds
        self.fallback_built: set[str] = set()
        self._find_extensions()
        self.defined_kernels = bool(self.triton) or any(v for v in self.ext_names.values())
        self.inherits_reference_forward = False

    # -- names -----------------------------------------------------------------------------------
    def qualname(self, node: ast.AST) -> str:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Call):
            return ""
        if not isinstance(node, ast.Name):
            return ""
        root = self.aliases.get(node.id, node.id)
        return ".".join([root, *reversed(parts)])

    def _is_triton_kernel(self, f: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        decorated = any(self.qualname(d.func if isinstance(d, ast.Call) else d) in TRITON_DECORATORS
                        for d in f.decorator_list)
        if not decorated:
            return False
        memory = any(isinstance(n, ast.Call) and self.qualname(n.func) in ("triton.language.load", "triton.language.store")
                     for n in ast.walk(f))
        if not memory:
            self.notes.append(f"Triton function {f.name} loads and stores nothing (no tl.load/tl.store)")
        return memory

    # -- CUDA / C++ extensions --------------------------------------------------------------------
    def _find_extensions(self) -> None:
        guarded = {id(n) for t in ast.walk(self.tree) if isinstance(t, ast.Try) and _falls_back(t)
                   for s in t.body for n in ast.walk(s)}
        for node in ast.walk(self.tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            call = node.value
            if not (isinstance(call, ast.Call) and self.qualname(call.func) in EXT_BUILDERS):
                continue
            holds = self._extension_holds(call)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                key = _target_key(t)
                if key is None:
                    continue
                self.ext_names[key] = holds
                if id(node) in guarded:
                    self.fallback_built.add(key)
        for node in ast.walk(self.tree):  # aliases: other = ext, self.ext = ext
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in self.ext_names:
                for t in node.targets:
                    key = _target_key(t)
                    if key is not None:
                        self.ext_names.setdefault(key, self.ext_names[node.value.id])
                        if node.value.id in self.fallback_built:
                            self.fallback_built.add(key)

    def _extension_holds(self, call: ast.Call) -> str:
        """"CUDA kernel" / "C++ kernel" when the extension's sources hold one, else "" (with a note)."""
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        cuda = C_COMMENT.sub("", _text_of(kw.get("cuda_sources"), self.strings))
        cpp = C_COMMENT.sub("", _text_of(kw.get("cpp_sources"), self.strings))
        if "__global__" in cuda and CUDA_WORK.search(cuda):
            return "CUDA kernel"
        if "__global__" in cpp and CUDA_WORK.search(cpp):
            return "CUDA kernel"
        if CPP_LOOP.search(cpp) or CPP_LOOP.search(cuda):
            return "C++ kernel"
        if self.qualname(call.func).endswith(".load") and "sources" in kw:
            return "C++/CUDA extension (from files)"
        self.notes.append("an extension is built, but its source has no kernel of its own (no __global__ with "
                          "thread indexing, no loop): it only calls ATen")
        return ""

    # -- configuration ---------------------------------------------------------------------------
    def config_labels(self) -> set[str]:
        found: set[str] = set()
        inner = {id(n.value) for n in ast.walk(self.tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(self.tree):
            outer = isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner
            name = self.qualname(node) if outer else ""
            if name:
                for prefix, label in CONFIG_PREFIXES:
                    if name == prefix or name.startswith(prefix + "."):
                        found.add(label)
                        break
                if name.endswith(".channels_last") or name.endswith(".channels_last_3d"):
                    found.add("channels_last layout")
            if isinstance(node, ast.keyword) and node.arg == "memory_format":
                found.add("channels_last layout")
            if isinstance(node, ast.keyword) and node.arg == "mode" and isinstance(node.value, ast.Constant) \
                    and node.value.value in ("reduce-overhead", "max-autotune"):
                found.add("CUDA graphs")
        return found

    # -- what forward reaches ---------------------------------------------------------------------
    def _methods(self, cls: ast.ClassDef, seen: set[str] | None = None) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        """Methods of cls and of its bases defined in this file (cls's own first); the reference Model's excluded."""
        seen = seen or set()
        seen.add(cls.name)
        out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for base in cls.bases:
            b = self.classes.get(base.id) if isinstance(base, ast.Name) else None
            if b is not None and b.name not in seen and b.name != "Model":
                out.update(self._methods(b, seen))
        out.update({s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))})
        return out

    def _self_attrs(self, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> dict[str, list[ast.AST]]:
        """self.attr -> the expressions assigned to it in any method (what calling self.attr may run)."""
        out: dict[str, list[ast.AST]] = {}
        for m in methods.values():
            for node in ast.walk(m):
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        key = _target_key(t)
                        if key and key.startswith("self."):
                            out.setdefault(key[5:], []).append(node.value)
        return out

    def _walk(self, strict: bool) -> tuple[set[str], set[str], bool]:
        """(kernels reached from ModelNew.forward, torch compute ops reached, reference forward reached). strict:
        skip the bodies of try blocks whose handler falls back instead of raising."""
        cls = self.classes.get("ModelNew")
        if cls is None:
            return set(), set(), False
        methods = self._methods(cls)
        if "forward" not in methods:
            self.inherits_reference_forward = True
            return set(), set(), True
        attrs = self._self_attrs(methods)
        kernels: set[str] = set()
        torch_ops: set[str] = set()
        reference = False
        todo: list[ast.AST] = [methods["forward"]]
        done: set[int] = set()
        while todo:
            fn = todo.pop()
            if id(fn) in done:
                continue
            done.add(id(fn))
            for node in _nodes(fn, strict):
                if isinstance(node, ast.Call):
                    kernel = self._kernel_call(node)
                    if kernel:
                        kernels.add(kernel)
                    name = self.qualname(node.func)
                    if TORCH_COMPUTE.match(name):
                        torch_ops.add(name.split(".")[-1])
                    if _is_super_forward(node.func):
                        reference = True
                    f = node.func
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
                            and f.attr not in methods and f.attr not in attrs:
                        torch_ops.add(f"self.{f.attr} (a layer of the reference)")
                if isinstance(node, ast.Name) and node.id in self.functions:
                    todo.append(self.functions[node.id])
                elif isinstance(node, ast.Name) and node.id in self.classes and node.id != "Model":
                    c = self.classes[node.id]
                    todo.extend(s for s in c.body if isinstance(s, ast.FunctionDef) and s.name in ("forward", "__call__"))
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                    if node.attr in methods:
                        todo.append(methods[node.attr])
                    todo.extend(attrs.get(node.attr, []))
        return kernels, torch_ops, reference

    def _kernel_call(self, call: ast.Call) -> str:
        func = call.func
        if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in self.triton:
            return f"Triton kernel {func.value.id}"
        if isinstance(func, ast.Attribute):
            key = _target_key(func.value)
            if key is not None and self.ext_names.get(key) and key not in self.fallback_built:
                return f"{self.ext_names[key]} ({func.attr})"
        return ""

    def reached_kernels(self) -> set[str]:
        strict, self._torch_ops, reference = self._walk(strict=True)
        if self.inherits_reference_forward:
            self.notes.append("ModelNew defines no forward: the reference's runs")
            return set()
        loose, _, _ = self._walk(strict=False)
        if loose - strict:
            self.notes.append("its kernel runs only inside a try/except that falls back to PyTorch when it fails: "
                              + ", ".join(sorted(loose - strict)[:3]))
        built_guarded = [k for k in self.fallback_built if self.ext_names.get(k)]
        if built_guarded:
            self.notes.append("its extension is built inside a try/except that falls back instead of failing")
        if self.defined_kernels and not loose and not built_guarded:
            self.notes.append("it defines a kernel that forward never calls")
        if reference and not strict:
            self.notes.append("forward calls the reference's forward")
        return strict

    def torch_compute(self) -> set[str]:
        return getattr(self, "_torch_ops", set())


def _target_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _falls_back(t: ast.Try) -> bool:
    """A try whose handler does not end in raise: the failure is swallowed and another path runs."""
    return any(not (h.body and isinstance(h.body[-1], ast.Raise)) for h in t.handlers)


def _nodes(fn: ast.AST, strict: bool) -> list[ast.AST]:
    """Every node of fn; strict leaves out the bodies of falling-back try blocks."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [fn]
    while stack:
        node = stack.pop()
        out.append(node)
        if strict and isinstance(node, ast.Try) and _falls_back(node):
            stack.extend([*node.handlers, *node.orelse, *node.finalbody])
            continue
        training = _training_test(node)
        if training is not None and isinstance(node, ast.If):  # the harness judges in eval mode: skip the training arm
            stack.extend([node.test, *(node.orelse if training else node.body)])
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _training_test(node: ast.AST) -> bool | None:
    """For `if self.training:` True, for `if not self.training:` False, else None."""
    if not isinstance(node, ast.If):
        return None
    test, negated = node.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    if isinstance(test, ast.Attribute) and test.attr == "training" and isinstance(test.value, ast.Name) \
            and test.value.id == "self":
        return not negated
    return None


def _is_super_forward(func: ast.AST) -> bool:
    """super().forward / Model.forward."""
    if not (isinstance(func, ast.Attribute) and func.attr == "forward"):
        return False
    v = func.value
    return (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super") or \
        (isinstance(v, ast.Name) and v.id == "Model")
