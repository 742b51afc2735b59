"""A seccomp filter every harness child installs before it runs anything of its task: SysV shared memory
(`shmget`) is refused with EPERM, as is every system call made through another architecture's entry (i386's
`int 0x80`, x32), which would bypass the filter's numbers.

Why: a SysV segment lives outside every process's mappings until attached, and without an IPC namespace (hosts
without bubblewrap) it outlives the child; nothing the harness runs (torch, CUDA, Triton, OpenMP, compilers) uses
SysV shared memory. memfd_create is NOT refused (the CUDA driver creates memfds when it starts): memfds and tmpfs
files are counted against the child's memory budget instead (kernels.parent.isolation.cgroups,
kernels.parent.isolation.hidden_memory). Filters are inherited by every thread and process the child starts and cannot be
removed.
"""

from __future__ import annotations

import ctypes
import platform
import struct

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
# architecture -> (AUDIT_ARCH value, shmget's number, the seccomp system call's number, x32 bit or 0)
ARCHES = {"x86_64": (0xC000003E, 29, 317, 0x40000000), "aarch64": (0xC00000B7, 194, 277, 0)}
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1


def program(machine: str) -> bytes | None:
    """The filter's BPF instructions for `machine` (platform.machine()), or None where it has no numbers."""
    if machine not in ARCHES:
        return None
    arch, shmget, _seccomp, x32 = ARCHES[machine]
    deny, allow = SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    code = [(BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            (BPF_JEQ_K, 1, 0, arch),  # native: go on; anything else is refused
            (BPF_RET_K, 0, 0, deny),
            (BPF_LD_W_ABS, 0, 0, 0)]  # seccomp_data.nr
    if x32:
        code.append((BPF_JGE_K, 2, 0, x32))  # x32 numbers: refused
    code += [(BPF_JEQ_K, 1, 0, shmget),
             (BPF_RET_K, 0, 0, allow),
             (BPF_RET_K, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in code)


def refuse_sysv_shm() -> bool:
    """Install the filter on this process (all its threads); False where the kernel or the machine does not allow it."""
    machine = platform.machine()
    code = program(machine)
    if code is None:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    seccomp_nr = ARCHES[machine][2]
    if libc.syscall(seccomp_nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog)) == 0:
        return True
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
