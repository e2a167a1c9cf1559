"""The gateway's seccomp filter (`apexrl.envs.local.seccomp`) installed in a fresh
process: each denied call fails with EPERM, other calls pass, and the architecture check
holds: an i386 `int 0x80` call and an x32-ABI call from an x86-64 process are refused
too, so a denied call cannot be made under another number (issue 42: nothing checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from apexrl.envs.local import seccomp

_PROBE = textwrap.dedent(
    """
    import ctypes, errno, json, mmap, os, sys
    from apexrl.envs.local import seccomp
    installed = seccomp.install() if sys.argv[1] == "filter" else None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def call(nr, *args):
        ctypes.set_errno(0)
        r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        return [r, ctypes.get_errno()]

    arch, numbers = seccomp.ARCHES[os.uname().machine]
    out = {"installed": installed, "getpid": call(39 if arch == 0xC000003E else 172),
           "denied": {str(nr): call(nr, 2, -1, 0, 0) for nr in numbers}}
    if os.uname().machine == "x86_64":
        out["x32_getpid"] = call(seccomp.X32_BIT | 39)
        # i386 getpid (20) through int 0x80: the kernel's 32-bit entry, arch AUDIT_I386
        code = b"\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3"  # mov eax, 20; int 0x80; ret
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE
                         | mmap.PROT_EXEC)
        page.write(code)
        fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
        out["int80_getpid"] = fn()
    out["pid"] = os.getpid()
    print(json.dumps(out))
    """
)


def _probe(mode: str) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.skipif(os.uname().machine not in seccomp.ARCHES, reason="no filter for this CPU")
def test_the_filter_denies_its_calls_on_every_entry():
    free, held = _probe("none"), _probe("filter")
    assert held["installed"] is True
    assert held["getpid"] == [held["pid"], 0]  # ordinary calls pass
    for nr, (ret, err) in held["denied"].items():
        assert (ret, err) == (-1, 1), f"syscall {nr} not denied with EPERM"
        assert free["denied"][nr] != [-1, 1], f"syscall {nr} fails with EPERM unfiltered"
    if "int80_getpid" in held:
        assert free["int80_getpid"] == free["pid"]  # the i386 entry works here...
        assert held["int80_getpid"] == -1  # ...and is refused under the filter (-EPERM)
        assert held["x32_getpid"] == [-1, 1]
        assert free["x32_getpid"] != [-1, 1]


def test_the_program_per_architecture():
    x86 = seccomp.program("x86_64")
    arm = seccomp.program("aarch64")
    assert seccomp.program("sparc") is None
    deny = seccomp.SECCOMP_RET_ERRNO | 1
    for prog, (arch, numbers) in ((x86, seccomp.ARCHES["x86_64"]),
                                  (arm, seccomp.ARCHES["aarch64"])):  # fmt: skip
        assert prog[:4] == [(0x20, 0, 0, 4), (0x15, 1, 0, arch), (0x06, 0, 0, deny),
                            (0x20, 0, 0, 0)]  # fmt: skip
        assert prog[-2:] == [(0x06, 0, 0, seccomp.SECCOMP_RET_ALLOW), (0x06, 0, 0, deny)]
        checks = [i for i in prog if i[0] == 0x15 and i[3] in numbers]
        assert [i[3] for i in checks] == list(numbers)
        for i in checks:  # each jump lands on the final deny
            at = prog.index(i)
            assert prog[at + 1 + i[1]] == (0x06, 0, 0, deny)
    x32 = [i for i in x86 if i[0] == 0x35]
    assert x32 == [(0x35, 9, 0, seccomp.X32_BIT)]
    assert x86[x86.index(x32[0]) + 1 + 9] == (0x06, 0, 0, deny)
    assert not [i for i in arm if i[0] == 0x35]
    assert seccomp.ARCHES["x86_64"][1] == (101, 310, 311, 312, 248, 249, 250, 438)
    assert seccomp.ARCHES["aarch64"][1] == (117, 270, 271, 272, 217, 218, 219, 438)


def test_the_program_falls_through_each_check():
    """A call that is not the one checked goes on to the next check (jf 0): a jump
    past it would leave the next number allowed."""
    for machine, (arch, _) in seccomp.ARCHES.items():
        prog = seccomp.program(machine)
        for i in prog:
            if i[0] in (0x15, 0x35) and i[3] != arch:
                assert i[2] == 0, (machine, i)


class _FakePrctl:
    """libc.prctl as install() calls it: records each call with the argtypes declared at
    that moment and the filter program passed, and fails the option named in `refuse`."""

    def __init__(self, refuse: int | None, err: int = 13) -> None:
        self.refuse, self.err = refuse, err
        self.argtypes = None
        self.calls: list[tuple] = []

    def __call__(self, option, a2, a3, a4, a5):
        import ctypes

        prog = None
        if option == seccomp.PR_SET_SECCOMP:
            p = seccomp._Prog.from_address(a3)
            prog = [(p.filter[k].code, p.filter[k].jt, p.filter[k].jf, p.filter[k].k)
                    for k in range(p.len)]  # fmt: skip
        self.calls.append((option, a2, a4, a5, list(self.argtypes or ()), prog))
        if option == self.refuse:
            ctypes.set_errno(self.err)
            return -1
        return 0


def _fake_libc(monkeypatch, refuse=None, err=13):
    import ctypes

    fake = _FakePrctl(refuse, err)
    opened = []

    class _Lib:
        def __init__(self, name, **kw):
            opened.append((name, kw))
            self.prctl = fake

    monkeypatch.setattr(ctypes, "CDLL", _Lib)
    return fake, opened


def test_install_on_an_unknown_machine_installs_nothing(monkeypatch):
    """No syscall numbers for this CPU: False, and prctl is never called (the gateway then
    says it runs unfiltered instead of claiming a filter)."""
    fake, opened = _fake_libc(monkeypatch)
    real = os.uname()
    sparc = os.uname_result((real.sysname, real.nodename, real.release, real.version, "sparc64"))
    monkeypatch.setattr(os, "uname", lambda: sparc)
    assert seccomp.install() is False
    assert fake.calls == [] and opened == []


@pytest.mark.skipif(os.uname().machine not in seccomp.ARCHES, reason="no filter for this CPU")
def test_install_calls_prctl_as_the_kernel_expects(monkeypatch):
    """no_new_privs first, then the filter of this machine, with errno kept by ctypes."""
    import ctypes

    fake, opened = _fake_libc(monkeypatch)
    assert seccomp.install() is True
    assert opened == [(None, {"use_errno": True})]  # else get_errno() reads a stale 0
    ulong = ctypes.c_ulong
    nnp, filt = fake.calls
    assert nnp == (38, 1, 0, 0, [ctypes.c_int, ulong, ulong, ulong, ulong], None)
    assert filt[:4] == (22, 2, 0, 0)
    assert filt[4] == [ctypes.c_int, ulong, ctypes.c_void_p, ulong, ulong]
    assert filt[5] == seccomp.program()


@pytest.mark.skipif(os.uname().machine not in seccomp.ARCHES, reason="no filter for this CPU")
@pytest.mark.parametrize(
    ("option", "what", "err"),
    [(38, "no_new_privs", 13), (22, "seccomp filter", 22)],
)
def test_a_refused_prctl_is_an_error_naming_the_step(monkeypatch, option, what, err):
    """The kernel refusing either step raises OSError with its errno and message (the
    gateway must not run as if filtered); no filter is attempted after a refused
    no_new_privs."""
    fake, _ = _fake_libc(monkeypatch, refuse=option, err=err)
    with pytest.raises(OSError) as e:
        seccomp.install()
    assert e.value.errno == err
    assert str(e.value) == f"[Errno {err}] {what}: {os.strerror(err)}"
    assert [c[0] for c in fake.calls] == ([38] if option == 38 else [38, 22])
