"""A program's world of its own: what a fork of the zygote does before it becomes a program.

Standard library only, no heldout imports: the runner (runner.py) loads this file's source as a
module of its own inside the sandbox, beside roles.py and codec.py.

A completion that learns across programs needs some state that outlives the program: a file, a
System V shared memory segment, semaphore or message queue, a POSIX message queue, a key in
the kernel's keyrings (the user keyring of a uid lives as long as the uid has processes, its
persistent keyring three days), or a process that survives. So each program, before anything
of its own runs:
- gets a fresh IPC namespace where its runner may make one (root with CAP_SYS_ADMIN: the
  subprocess backend's workers), so no System V object or POSIX queue of an earlier program is
  visible to it, and nothing it makes outlives it (all but the judge, which runs only the
  task's trusted text under the same filter);
- is refused, by a seccomp filter it cannot lift, every system call that makes or reaches such
  objects (System V IPC, POSIX message queues, the kernel's keyrings), on both backends: inside
  a container, which shares one IPC namespace among all its programs, that refusal is what
  makes them absent, and on every backend it is what keeps the keyrings (which no namespace
  but a user namespace separates) out of reach;
- can write nowhere but its own work directory, which the runner removes after it (the
  backends leave no other writable place: the jail's and the container's roots are read-only,
  /tmp is the runner's, not world-writable, and there is no /dev/shm or /dev/mqueue a program
  may write);
- and every process it started is killed when it ends (runner.py).
The filter also refuses every system call made through another architecture's entry point
(a 64-bit process may still make i386 or x32 calls), which would get past a table of numbers.
"""

import ctypes
import errno
import os
import platform
import struct

CLONE_NEWIPC = 0x08000000
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# Classic BPF, as seccomp(2) reads it: the opcodes, and where seccomp_data keeps its fields.
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_NUMBER_AT, _ARCH_AT = 0, 4
_ALLOW = 0x7FFF0000
_REFUSE = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO: the call fails with EPERM

# System V IPC, POSIX message queues, the keyrings: (architecture's audit id, call numbers).
_SHARED_STATE_CALLS = {
    "x86_64": (0xC000003E, (
        29, 30, 31, 67,  # shmget shmat shmctl shmdt
        64, 65, 66, 220,  # semget semop semctl semtimedop
        68, 69, 70, 71,  # msgget msgsnd msgrcv msgctl
        240, 241, 242, 243, 244, 245,  # mq_open mq_unlink mq_timedsend/receive/notify/getsetattr
        248, 249, 250,  # add_key request_key keyctl
    )),
    "aarch64": (0xC00000B7, (
        180, 181, 182, 183, 184, 185,  # mq_open ... mq_getsetattr
        186, 187, 188, 189,  # msgget msgctl msgrcv msgsnd
        190, 191, 192, 193,  # semget semctl semtimedop semop
        194, 195, 196, 197,  # shmget shmctl shmat shmdt
        217, 218, 219,  # add_key request_key keyctl
    )),
}
# x86_64's x32 calls are its own numbers with this bit set.
_X32_BIT = 0x40000000


class WorldError(OSError):
    """The program's world could not be made: the program must not run."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def new_ipc_namespace():
    """Move this process into an IPC namespace of its own (needs CAP_SYS_ADMIN)."""
    if _libc().unshare(CLONE_NEWIPC) != 0:
        raise WorldError(ctypes.get_errno(), "unshare(CLONE_NEWIPC) failed")


def become_subreaper():
    """Make orphans of this process's descendants its children (the runner's, for programs
    that the zygote forks), where it is not already the init of its PID namespace."""
    if os.getpid() != 1 and _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise WorldError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def filter_program(machine=None):
    """The seccomp filter's instructions, as bytes: refuse the shared-state calls and any call
    from a foreign entry point, allow the rest."""
    machine = machine or platform.machine()
    if machine not in _SHARED_STATE_CALLS:
        raise WorldError(errno.ENOSYS, f"no seccomp filter for the {machine} architecture")
    arch, numbers = _SHARED_STATE_CALLS[machine]
    # Layout: [arch check] [number] [x32 check on x86_64] [one test per number] allow, refuse.
    head = [(_LOAD_WORD, 0, 0, _ARCH_AT), (_JUMP_EQUAL, 1, 0, arch), (_RETURN, 0, 0, _REFUSE),
            (_LOAD_WORD, 0, 0, _NUMBER_AT)]
    tests = [(_JUMP_AT_LEAST, 0, 0, _X32_BIT)] if machine == "x86_64" else []
    tests += [(_JUMP_EQUAL, 0, 0, number) for number in numbers]
    # Each test jumps, when true, over the tests after it and the allow, onto the refusal.
    tests = [(code, len(tests) - index, 0, k) for index, (code, _, _, k) in enumerate(tests)]
    tail = [(_RETURN, 0, 0, _ALLOW), (_RETURN, 0, 0, _REFUSE)]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in head + tests + tail)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def refuse_shared_state():
    """Install the filter on this process and everything it will start; it cannot be lifted."""
    code = filter_program()
    instructions = ctypes.create_string_buffer(code, len(code))
    program = _Program(len(code) // 8, ctypes.addressof(instructions))
    libc = _libc()
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        raise WorldError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(program), 0, 0) != 0:
        raise WorldError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
