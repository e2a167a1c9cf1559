"""A seccomp filter for the world gateway and everything it starts (the code tool's shell).

The gateway needs none of the calls that reach into another process or the kernel's
key store; its children inherit the filter (seccomp filters survive fork and exec), so
the code tool's shell cannot use them either:

    ptrace, pidfd_getfd, process_vm_readv, process_vm_writev, kcmp   (another process)
    keyctl, add_key, request_key                                     (kernel keyrings)

each fails with EPERM. A call made through another architecture's entry (32-bit
syscalls on x86-64, the x32 ABI) fails with EPERM too, so the numbers above cannot be
dodged. A small classic-BPF program installed with prctl (no library needed); it
needs no_new_privs, which every sandbox process has.
"""

from __future__ import annotations

import ctypes
import errno
import os

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
X32_BIT = 0x40000000

# (audit arch, syscall numbers: ptrace, process_vm_readv, process_vm_writev, kcmp,
#  add_key, request_key, keyctl, pidfd_getfd)
ARCHES = {
    "x86_64": (0xC000003E, (101, 310, 311, 312, 248, 249, 250, 438)),
    "aarch64": (0xC00000B7, (117, 270, 271, 272, 217, 218, 219, 438)),
}


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def program(machine: str | None = None) -> list[tuple[int, int, int, int]] | None:
    """The filter for this machine as (code, jt, jf, k), or None for an unknown one."""
    found = ARCHES.get(machine or os.uname().machine)
    if found is None:
        return None
    arch, numbers = found
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    n = len(numbers)
    insns = [
        (BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (BPF_JEQ_K, 1, 0, arch),
        (BPF_RET_K, 0, 0, deny),  # another architecture's entry
        (BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == ARCHES["x86_64"][0]:
        insns.append((BPF_JGE_K, n + 1, 0, X32_BIT))  # the x32 ABI: to the deny below
    for i, nr in enumerate(numbers):
        insns.append((BPF_JEQ_K, n - i, 0, nr))  # to the deny
    insns += [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), (BPF_RET_K, 0, 0, deny)]
    return insns


def install() -> bool:
    """Install the filter on this process (and its future children). False on a machine
    whose syscall numbers are not known here; an error when the kernel refuses it."""
    insns = program()
    if insns is None:
        return False
    arr = (_Insn * len(insns))(*[_Insn(*i) for i in insns])
    prog = _Prog(len(insns), arr)
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"no_new_privs: {os.strerror(e)}")
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"seccomp filter: {os.strerror(e)}")
    return True
