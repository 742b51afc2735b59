"""Failure logs trimmed to the candidate's own frames before the debug agent sees them (prompts/logs.py)."""

from __future__ import annotations

from pathlib import Path

from search.engine.context import build_window
from search.engine.tree import Tree
from search.teams.llm.prompts import debug
from search.teams.llm.prompts.logs import MAX_COMPILER_LINES, trim_log, trimmed_window

WORK = "/srv/stark/var/cache/kernels/work/f1d18398876346aaa5e5"
SITE = "/srv/stark/.venv/lib/python3.11/site-packages"

RUNTIME = f"""--- traceback of the reported error ---
Traceback (most recent call last):
  File "/srv/stark/kernels/child/candidate.py", line 287, in call
    return loading.flatten_outputs(model(*inputs))
                                   ^^^^^^^^^^^^^^
  File "{SITE}/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/torch/nn/modules/module.py", line 1789, in _call_impl
    return forward_call(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{WORK}/candidate.py", line 11, in forward
    return helper(x) * 2.0
           ^^^^^^^^^
  File "{WORK}/candidate.py", line 5, in helper
    return x.view(3, -1, 7)
           ^^^^^^^^^^^^^^^^
RuntimeError: shape '[3, -1, 7]' is invalid for input of size 4096

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/stark/kernels/child/worker.py", line 83, in main
    handlers[task["kind"]](task, work_dir, channel)
  File "/srv/stark/kernels/child/candidate.py", line 155, in run
    model, facts, trials = on_device(task, problem, cls, device, channel, guard)
                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/srv/stark/kernels/child/candidate.py", line 289, in call
    raise HarnessFailure("runtime_error", f"ModelNew.forward raised {{type(exc).__name__}} in {{what}}: {{exc}}") from exc
kernels.child.reference_work.HarnessFailure: ModelNew.forward raised RuntimeError in trial 0 (seed 1): shape '[3, -1, 7]' is invalid for input of size 4096"""

EXT = f"{WORK}/cache/torch_extensions/bad_ext/main.cpp"
COMMAND = (f"c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=bad_ext -DTORCH_API_INCLUDE_EXTENSION_H -isystem {SITE}/torch/"
           f"include -isystem {SITE}/torch/include/torch/csrc/api/include -fPIC -std=c++17 -c {EXT} -o main.o")
GXX = f"""Traceback (most recent call last):
  File "{SITE}/torch/utils/cpp_extension.py", line 2893, in _run_ninja_build
    subprocess.run(
  File "/usr/lib/python3.11/subprocess.py", line 571, in run
    raise CalledProcessError(retcode, process.args,
subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/stark/kernels/child/candidate.py", line 116, in build
    module = loading.load_module(task["candidate_source"], "candidate", work_dir)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/srv/stark/kernels/child/loading.py", line 27, in load_module
    spec.loader.exec_module(module)
  File "<frozen importlib._bootstrap_external>", line 940, in exec_module
  File "<frozen importlib._bootstrap>", line 241, in _call_with_frames_removed
  File "{WORK}/candidate.py", line 8, in <module>
    mod = load_inline(name="bad_ext", cpp_sources=src, functions=["f"])
          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/torch/utils/cpp_extension.py", line 2285, in load_inline
    return _jit_compile(
           ^^^^^^^^^^^^^
  File "{SITE}/torch/utils/cpp_extension.py", line 2382, in _jit_compile
    _write_ninja_file_and_build_library(
  File "{SITE}/torch/utils/cpp_extension.py", line 2543, in _write_ninja_file_and_build_library
    _run_ninja_build(
  File "{SITE}/torch/utils/cpp_extension.py", line 2910, in _run_ninja_build
    raise RuntimeError(message) from e
RuntimeError: Error building extension 'bad_ext': [1/2] {COMMAND}
FAILED: main.o
{COMMAND}
{EXT}: In function ‘at::Tensor f(at::Tensor)’:
{EXT}:4:47: error: ‘undefined_name’ was not declared in this scope
    4 | torch::Tensor f(torch::Tensor x) {{ return x * undefined_name; }}
      |                                               ^~~~~~~~~~~~~~
ninja: build stopped: subcommand failed.
"""

NVCC = f"""RuntimeError: Error building extension 'fused': [1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -ccbin gcc -I{SITE}/torch/include -O3 -c {WORK}/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -ccbin gcc -I{SITE}/torch/include -O3 -c {WORK}/cuda.cu -o cuda.cuda.o
{WORK}/cuda.cu(12): error: identifier "blockIdy" is undefined
      int row = blockIdy.y * blockDim.y + threadIdx.y;
                ^

1 error detected in the compilation of "{WORK}/cuda.cu".
ninja: build stopped: subcommand failed."""


def test_a_runtime_traceback_keeps_the_candidates_frames_and_the_exception_not_the_harness() -> None:
    out = trim_log(RUNTIME)
    assert "kernels/child/candidate.py" not in out and "kernels/child/worker.py" not in out
    assert '  File "candidate.py", line 11, in forward\n    return helper(x) * 2.0\n           ^^^^^^^^^' in out
    assert '  File "candidate.py", line 5, in helper\n    return x.view(3, -1, 7)' in out
    assert "RuntimeError: shape '[3, -1, 7]' is invalid for input of size 4096" in out
    assert out.rstrip().endswith("shape '[3, -1, 7]' is invalid for input of size 4096")  # the final exception line
    assert '  File "torch/nn/modules/module.py", line 1778, in _wrapped_call_impl' in out  # the first torch frame
    assert "frame(s) of the harness and libraries left out" in out and len(out) < len(RUNTIME) * 0.6


def test_a_load_inline_compile_error_keeps_the_compilers_lines_intact() -> None:
    out = trim_log(GXX)
    for line in (f"{EXT}:4:47: error: ‘undefined_name’ was not declared in this scope",
                 "    4 | torch::Tensor f(torch::Tensor x) { return x * undefined_name; }",
                 "      |                                               ^~~~~~~~~~~~~~",
                 f"{EXT}: In function ‘at::Tensor f(at::Tensor)’:", "FAILED: main.o",
                 "ninja: build stopped: subcommand failed."):
        assert line in out.splitlines(), line
    assert COMMAND not in out and out.count("c++ -MMD") == 2  # the command lines are shortened, not dropped
    assert '  File "candidate.py", line 8, in <module>' in out and "load_inline(name=\"bad_ext\"" in out
    assert "kernels/child/loading.py" not in out and "<frozen importlib" not in out
    # of the four torch frames from load_inline down, the first and the last
    assert "line 2285, in load_inline" in out and "line 2910, in _run_ninja_build" in out
    assert "line 2543" not in out and "line 2382" not in out and "in _jit_compile" not in out


def test_an_nvcc_error_is_kept_with_its_source_line() -> None:
    out = trim_log(NVCC)
    assert f'{WORK}/cuda.cu(12): error: identifier "blockIdy" is undefined' in out.splitlines()
    assert "      int row = blockIdy.y * blockDim.y + threadIdx.y;" in out.splitlines()
    assert f'1 error detected in the compilation of "{WORK}/cuda.cu".' in out.splitlines()
    assert max(len(line) for line in out.splitlines()) < 250  # nvcc's command lines are shortened


def test_compiler_output_is_bounded() -> None:
    errors = "\n".join(f"{EXT}:{k}:1: error: expected ';' before '}}' token" for k in range(1, 201))
    out = trim_log(errors)
    kept = [line for line in out.splitlines() if ": error:" in line]
    assert len(kept) == MAX_COMPILER_LINES and kept[0].startswith(f"{EXT}:1:1:")
    assert "more compiler output left out" in out


def test_plain_output_and_empty_logs_pass_through() -> None:
    assert trim_log("") == ""
    assert trim_log("warming up\ncorrect on 5 trials") == "warming up\ncorrect on 5 trials"


PROBLEM = (Path(__file__).parent / "fixtures" / "tiny_relu.py").read_text()


def test_the_debug_prompt_shows_the_trimmed_logs_and_the_tree_keeps_the_full_ones() -> None:
    source = PROBLEM.replace("class Model(", "class ModelNew(")
    tree = Tree(PROBLEM, {"target": "cpp"}, root_source=source)
    tree.root.status, tree.root.verdict = "done", "pass"
    failed = tree.add_child(0, "plan+code", source=source, status="done", verdict="build_error",
                            reasons=["the candidate failed to build/import"],
                            result={"logs": {"build": GXX, "run": RUNTIME}})
    window = trimmed_window(build_window(tree, "debug", failed.id))
    user = debug.user_prompt(window, None)
    assert "‘undefined_name’ was not declared in this scope" in user and 'File "candidate.py", line 8' in user
    assert "kernels/child/candidate.py" not in user and "kernels/child/loading.py" not in user
    assert tree[failed.id].result["logs"]["build"] == GXX  # type: ignore[index]  # the node itself is untouched
