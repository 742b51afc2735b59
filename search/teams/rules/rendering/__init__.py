"""Rendering: the candidate file (candidate) and the rules team's kernel writers, one table of writers per backend over
the typed fusion kinds. The opening lines every writer shares are in preamble, what the two C++ ones share in
cxx_common.

    search.teams.rules.rendering.table.WRITERS[(fusion kind, backend)] -> Writer      (.base)

               elementwise        reduction          row
    cpp-omp    cpp.elementwise    cpp.reduction      cpp.row             C++ for the CPU, OpenMP + SIMD
    cpp-serial (the same, serial)                                        C++ for the CPU, a plain loop
    cuda       cuda.elementwise_* cuda.reduction_*   cuda.row_*          CUDA C++: __global__ template + host
    triton     triton.elementwise_* triton.reduction_* triton.row_*      @triton.jit kernel + Python launcher

A new fusion kind needs a writer in every backend (Backend refuses to be built without one); a new backend needs a
module with a writer per kind and an `assemble` for its section. Each writer declares the locals its generated code
declares (Writer.reserved); a kernel parameter named like any of them, in any backend, gets the suffix `_in`, so a
fusion's parameters are named the same whichever backend writes it."""
