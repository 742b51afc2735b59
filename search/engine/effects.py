"""What a module-level statement added outside the spans does when the module is imported (the grounding
allowance, search.engine.allowance, judges added lines by their effect, not their shape).

A new statement may define new names: an import, a function, a class, an assignment of a value built without
running code (literals, names, attributes, arithmetic, containers, comprehensions) or by building an extension
(`load_inline`, `load`, `ctypes.CDLL`, `torch.ops.load_library`, `torch.compile`, ...) or by a side-effect-free
helper (`tuple`, `os.path.join`, `triton.Config`, `inspect.signature`, ...). It may define a new operator through
`torch.library` (`@torch.library.custom_op("mylib::name", ...)`, `triton_op`, the call form on the right of an
assignment) in a namespace of its own, and register kernels for the operators it defines (`@op.register_fake`,
`@op.register_kernel("cuda")`, `@torch.library.register_fake("mylib::name")`), never for torch's own (`aten::...`).
It may not

- bind a name the skeleton already binds (an import may repeat one of the skeleton's, bound to the same thing),
  a builtin (`def super()`), a name the skeleton's fixed lines use, or a module dunder (`__getattr__`);
- call anything else when the module is imported: on the right of an assignment (`_p = setattr(ModelNew, ...)`,
  `_ = exec(...)`), in a default argument, an annotation, a class's bases or body, or a decorator's arguments;
- decorate, except with a kernel decorator (`triton.jit`, `triton.autotune(...)`, `torch.compile`, ...);
- run statements in a class body other than definitions, assignments of such values and docstrings, give a class a
  metaclass, or define the hooks Python runs when a class is created or subscripted (`__init_subclass__`, ...).

Function bodies are not judged: they run only when the candidate's spans call them.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable

DEFINED = ""  # what a name bound by a definition (def, class, assignment) is bound to

BUILDERS = frozenset({  # calls that build or load a kernel extension
    "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load", "torch.ops.load_library",
    "ctypes.CDLL", "ctypes.cdll.LoadLibrary", "ctypes.PyDLL", "torch.compile", "torch.jit.script",
    "cupy.RawKernel", "cupy.RawModule", "numba.cuda.jit", "numba.jit", "numba.njit",
})
PURE_CALLS = frozenset({  # calls that only compute a value from their arguments
    "str", "int", "float", "bool", "bytes", "len", "range", "tuple", "list", "dict", "set", "frozenset", "min", "max",
    "abs", "round", "sorted", "sum", "enumerate", "zip", "divmod", "pow", "repr", "hex", "ord", "chr", "any", "all",
    "reversed", "isinstance", "issubclass", "slice", "complex", "format",
    "os.path.join", "os.path.dirname", "os.path.abspath", "os.path.realpath", "os.path.basename", "os.environ.get",
    "os.getenv", "pathlib.Path", "textwrap.dedent", "inspect.signature", "functools.partial",
    "collections.namedtuple", "typing.NamedTuple", "typing.TypeVar", "dataclasses.field",
    "torch.device", "torch.finfo", "torch.iinfo", "torch.Size",
    "triton.Config", "triton.cdiv", "triton.next_power_of_2", "triton.language.constexpr",
})
PURE_PREFIXES = ("math.", "operator.")
DECORATORS = frozenset({  # decorators that make a kernel or a plain wrapper of the function and do nothing else
    "triton.jit", "triton.autotune", "triton.heuristics", "torch.compile", "torch.jit.script", "torch.no_grad",
    "torch.inference_mode", "numba.jit", "numba.njit", "numba.cuda.jit", "functools.cache", "functools.lru_cache",
    "functools.wraps", "staticmethod", "classmethod", "property", "dataclasses.dataclass", "typing.final",
})
LIBRARY_OPS = frozenset({"torch.library.custom_op", "torch.library.triton_op"})  # define a new operator
# register a kernel (fake, device, autograd) for an operator named by its first argument
LIBRARY_REGISTRATIONS = frozenset({"torch.library.register_fake", "torch.library.register_kernel",
                                   "torch.library.register_autograd", "torch.library.register_vmap",
                                   "torch.library.impl", "torch.library.impl_abstract"})
OP_METHODS = frozenset({"register_fake", "register_kernel", "register_autograd", "register_vmap"})
# operator namespaces torch and its companion libraries own: a kernel registered there replaces what the reference runs
TORCH_NAMESPACES = frozenset({
    "aten", "prim", "prims", "torch", "quantized", "_quantized", "quantized_decomposed", "mkldnn", "onednn",
    "c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "profiler", "rngprims", "higher_order",
    "inductor", "_inductor_test", "fbgemm", "torchvision", "torchaudio", "image", "cuda", "mps", "xpu",
    "debugprims", "sparse", "triton", "streams", "fsdp", "_test",
})
CLASS_HOOKS = frozenset({"__init_subclass__", "__class_getitem__", "__set_name__", "__mro_entries__", "__prepare__"})
BUILTINS = frozenset(dir(builtins))
KERNEL_DECORATORS = "triton.jit, triton.autotune(...), triton.heuristics(...), torch.compile, functools.cache"


def show(text: str, most: int = 80) -> str:
    """A line as quoted in a message: stripped, cut at `most` characters."""
    text = text.strip()
    return repr(text if len(text) <= most else text[:most - 1] + "…")


def bindings(stmt: ast.stmt) -> list[tuple[str, str]]:
    """(name, what it is bound to) for each module-level name the statement binds: the imported module or object
    for an import (`import torch.nn as nn` -> ("nn", "torch.nn")), DEFINED otherwise."""
    if isinstance(stmt, ast.Import):
        return [(a.asname, a.name) if a.asname else (a.name.split(".")[0], a.name.split(".")[0]) for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        module = "." * stmt.level + (stmt.module or "")
        return [(a.asname or a.name, f"{module}.{a.name}") for a in stmt.names]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(stmt.name, DEFINED)]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return [(n.id, DEFINED) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _evaluated(expr: ast.AST) -> list[ast.AST]:
    """The nodes of an expression that evaluating it evaluates: all of them but a lambda's body."""
    out: list[ast.AST] = []
    todo = [expr]
    while todo:
        node = todo.pop(0)
        out.append(node)
        if isinstance(node, ast.Lambda):
            continue  # its defaults are judged by Effects.signature
        todo.extend(ast.iter_child_nodes(node))
    return out


class Effects:
    """Judges added statements one by one (in file order) against the skeleton's module-level names (`bound`) and
    the names its fixed lines use (`used`); `line(node)` gives a node's line in the file and `text(no)` its text."""

    def __init__(self, bound: dict[str, str], used: set[str], line: Callable[[ast.AST], int],
                 text: Callable[[int], str]) -> None:
        self.skeleton = dict(bound)
        self.names = dict(bound)  # name -> what it is bound to, the added statements' bindings included
        self.used = used
        self.line = line
        self.text = text
        self.ops: set[str] = set()  # operators ("mylib::name") the added statements define through torch.library
        self.op_objects: set[str] = set()  # names bound to such an operator (its register_* decorators are allowed)

    def at(self, node: ast.AST) -> str:
        no = self.line(node)
        return f"line {no} {show(self.text(no))}"

    # -- names ------------------------------------------------------------------------------------------------------
    def qualified(self, expr: ast.expr) -> str | None:
        """The dotted name an expression refers to through the module's imports (`F.relu` -> torch.nn.functional.
        relu), the name itself for a builtin or an unbound name; None for a locally defined object or an expression
        that is not a dotted name."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        root = self.names.get(expr.id, expr.id)
        if root == DEFINED:
            return None
        return ".".join([root.lstrip("."), *reversed(parts)])

    def bind(self, name: str, what: str, node: ast.AST) -> str | None:
        """Why the statement at `node` may not bind `name` to `what`, or None (and the binding is recorded)."""
        where = self.at(node)
        if name in self.skeleton and (what == DEFINED or self.skeleton[name] != what):
            return f"{where} rebinds {name!r}, which the skeleton already binds"
        if name not in self.skeleton:
            if name.startswith("__") and name.endswith("__"):
                return f"{where} binds {name!r}, a module-level dunder that changes how the module behaves"
            if name in BUILTINS:
                use = ", which the skeleton's fixed lines use" if name in self.used else ""
                return f"{where} shadows the builtin {name!r}{use}"
            if name in self.used:
                return f"{where} binds {name!r}, which the skeleton's fixed lines use"
        self.names[name] = what
        return None

    # -- expressions ------------------------------------------------------------------------------------------------
    def call_allowed(self, func: ast.expr) -> bool:
        name = self.qualified(func)
        return name is not None and (name in BUILDERS or name in PURE_CALLS or name.startswith(PURE_PREFIXES))

    def runs(self, expr: ast.AST | None, where: str) -> str | None:
        """Why evaluating `expr` (in `where`: "on the right of the assignment", "in a default argument", ...) runs
        code beyond building values and extensions, or None."""
        if expr is None:
            return None
        for node in _evaluated(expr):
            if isinstance(node, ast.Call) and self.qualified(node.func) in LIBRARY_OPS:
                why = self.new_operator(node)
                if why:
                    return why
                continue
            if isinstance(node, ast.Call) and not self.call_allowed(node.func):
                return (f"{self.at(node)} calls {ast.unparse(node.func)}(...) {where} when the module is imported; "
                        "new module-level code may only build values and extensions (load_inline, load, "
                        "ctypes.CDLL, torch.compile, ...)")
            if isinstance(node, ast.NamedExpr):
                return f"{self.at(node)} assigns with := {where}"
            if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
                return f"{self.at(node)} uses {type(node).__name__.lower()} {where}"
            if isinstance(node, ast.Lambda):
                why = self.signature(node.args, where="in a lambda's default argument")
                if why:
                    return why
        return None

    def signature(self, args: ast.arguments, where: str = "in a default argument") -> str | None:
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            why = self.runs(default, where)
            if why:
                return why
        return None

    def annotations(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
        every = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg]
        for expr in [*(a.annotation for a in every if a is not None), fn.returns]:
            why = self.runs(expr, "in an annotation")
            if why:
                return why
        return None

    def decorators(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str | None:
        for dec in stmt.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            name = self.qualified(call.func if call else dec)
            library = self.library_decorator(dec, stmt)
            if library is not None:
                if library:
                    return library
                continue
            if name not in DECORATORS:
                return (f"{self.at(dec)} decorates {stmt.name!r} with @{ast.unparse(dec)}, which runs when the module "
                        f"is imported; a new definition may carry only kernel decorators ({KERNEL_DECORATORS})")
            if call:
                for arg in [*call.args, *(k.value for k in call.keywords)]:
                    why = self.runs(arg, f"in the arguments of @{name}")
                    if why:
                        return why
        return None

    # -- statements -------------------------------------------------------------------------------------------------
    def statement(self, stmt: ast.stmt) -> str | None:
        """Why a module-level statement added outside the spans is not allowed, or None (its names recorded)."""
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in stmt.names):
                return f"{self.at(stmt)} imports * (names that cannot be checked); import the names it needs"
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            why = self.definition(stmt, in_class=None)
            if why:
                return why
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            why = self.assignment(stmt)
            if why:
                return why
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):  # a bare string: a comment
            word = "an expression" if isinstance(stmt, ast.Expr) else f"a `{type(stmt).__name__.lower()}`"
            return f"{self.at(stmt)} is {word} statement, not an import or a definition"
        for name, what in bindings(stmt):
            why = self.bind(name, what, stmt)
            if why:
                return why
        return None

    def assignment(self, stmt: ast.Assign | ast.AnnAssign) -> str | None:
        targets = list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]
        if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store, ast.Starred))
                   for t in targets for n in ast.walk(t)):
            return f"{self.at(stmt)} assigns to an attribute or an item, not to a new name"
        if isinstance(stmt, ast.AnnAssign):
            why = self.runs(stmt.annotation, "in an annotation")
            if why:
                return why
        why = self.runs(stmt.value, "on the right of the assignment")
        if why is None and isinstance(stmt.value, ast.Call) and self.qualified(stmt.value.func) in LIBRARY_OPS:
            self.op_objects.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        return why

    # -- operators defined through torch.library --------------------------------------------------------------------
    def operator_name(self, call: ast.Call) -> tuple[str | None, str | None]:
        """The operator a torch.library call names (its first argument, a literal "namespace::name"), or why not."""
        arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("name", "op", "qualname")),
                                                  None)
        what = ast.unparse(call.func)
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and "::" in arg.value):
            return None, (f"{self.at(call)} calls {what}(...) without a literal operator name 'namespace::name'; "
                          "name the operator it defines or registers for, e.g. \"mylib::fused_relu\"")
        namespace = arg.value.split("::", 1)[0]
        if namespace in TORCH_NAMESPACES:
            return None, (f"{self.at(call)} calls {what}(...) for {arg.value!r}, in torch's own namespace "
                          f"{namespace!r}: a kernel there replaces what the reference runs; define a new operator in a "
                          "namespace of your own (\"mylib::...\") and call it from the spans")
        return arg.value, None

    def arguments_run(self, call: ast.Call, skip_first: bool) -> str | None:
        rest = [*call.args[1 if skip_first else 0:], *(k.value for k in call.keywords)]
        for arg in rest:
            why = self.runs(arg, f"in the arguments of {ast.unparse(call.func)}")
            if why:
                return why
        return None

    def new_operator(self, call: ast.Call) -> str | None:
        """Why a torch.library.custom_op/triton_op call may not define its operator, or None (it is recorded)."""
        op, why = self.operator_name(call)
        if op is None:
            return why
        why = self.arguments_run(call, skip_first=True)
        if why is None:
            self.ops.add(op)
        return why

    def library_decorator(self, dec: ast.expr, stmt: ast.stmt) -> str | None:
        """None when `dec` is not a torch.library decorator; else "" when it defines a new operator or registers a
        kernel for one the added statements define, or why it may not."""
        call = dec if isinstance(dec, ast.Call) else None
        target = call.func if call else dec
        name = self.qualified(target)
        if name in LIBRARY_OPS:
            if call is None:
                return (f"{self.at(dec)} uses @{name} without its operator name; write "
                        f"@{ast.unparse(target)}(\"mylib::name\", mutates_args=())")
            why = self.new_operator(call)
            if why is None and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.op_objects.add(stmt.name)
            return why or ""
        if name in LIBRARY_REGISTRATIONS:
            if call is None:
                return f"{self.at(dec)} uses @{name} without the operator it registers for"
            op, why = self.operator_name(call)
            if op is None:
                return why
            if op not in self.ops:
                return (f"{self.at(dec)} registers a kernel for {op!r}, an operator the added code does not define; "
                        "register kernels only for operators defined here with torch.library.custom_op")
            return self.arguments_run(call, skip_first=True) or ""
        if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id in self.op_objects and target.attr in OP_METHODS):
            return (self.arguments_run(call, skip_first=False) or "") if call else ""
        return None

    def definition(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
                   in_class: str | None) -> str | None:
        """Why a def or class (at module level, or in the body of class `in_class`) runs code when it is defined."""
        why = self.decorators(stmt)
        if why:
            return why
        if in_class is not None and stmt.name in CLASS_HOOKS:
            return (f"{self.at(stmt)} defines {stmt.name} in class {in_class!r}, a hook Python runs when classes are "
                    "created or subscripted at import")
        if not isinstance(stmt, ast.ClassDef):
            return self.signature(stmt.args) or self.annotations(stmt)
        if stmt.keywords:
            return (f"{self.at(stmt)} gives class {stmt.name!r} a {stmt.keywords[0].arg or '**'}=..., which runs code "
                    "when the class is created; derive it from plain bases only")
        for base in stmt.bases:
            why = self.runs(base, "in the class's bases")
            if why:
                return why
        for inner in stmt.body:
            why = self.class_statement(inner, stmt.name)
            if why:
                return why
        return None

    def class_statement(self, stmt: ast.stmt, owner: str) -> str | None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return self.definition(stmt, in_class=owner)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            why = self.assignment(stmt)
            return why.replace("assignment", f"assignment in class {owner!r}") if why else None
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return None
        return (f"{self.at(stmt)} runs in the body of class {owner!r} when the module is imported; a class body may "
                "hold only definitions, assignments of values and a docstring")
