# A completion's module code that tries every channel by which one judged program could leave
# state for the next (tests/sandbox/test_fresh_world.py). MODE and SECRET are set by the test before
# this text: MODE "write" plants SECRET in every channel it can, then reads its own plants back
# (so a channel it reports planted is one the reader is shown able to find); MODE "read" looks
# in every channel for anything planted. It prints one JSON line.
import ctypes
import json
import os
import re

PREFIX = "HELDOUT-" + "PLANT-"
KEY = 0x48454C44
NAME = b"/heldout-plant"
FILE = "heldout-plant"
KEY_NAME = b"heldout-plant"
KEYRINGS = {"user": -4, "session": -3}
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
syscall = libc.syscall
syscall.restype = ctypes.c_long
refused, planted, found = {}, [], {}


def token_in(data):
    if isinstance(data, bytes):
        data = data.decode("latin-1")
    return re.findall(re.escape(PREFIX) + "[0-9a-f]{32}", data)


def failed(channel, result):
    if result == -1 or result is None or result == ctypes.c_void_p(-1).value:
        refused[channel] = os.strerror(ctypes.get_errno())
        return True
    return False


def note(channel, data):
    for token in token_in(data):
        found.setdefault(channel, []).append(token)


def sysv_shm(write):
    shmid = libc.shmget(KEY, 4096, (0o1666 if write else 0))
    if failed("sysv_shm", shmid):
        return
    address = libc.shmat(shmid, None, 0)
    if failed("sysv_shm", address):
        return
    if write:
        ctypes.memmove(address, SECRET.encode(), len(SECRET))
        planted.append("sysv_shm")
    note("sysv_shm", ctypes.string_at(address, 4096))


class Message(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_long), ("text", ctypes.c_char * 256)]


def sysv_msg(write):
    queue = libc.msgget(KEY, (0o1666 if write else 0))
    if failed("sysv_msg", queue):
        return
    message = Message(1, SECRET.encode())
    if write and not failed("sysv_msg", libc.msgsnd(queue, ctypes.byref(message), 256, 0o4000)):
        planted.append("sysv_msg")
    got = Message()
    # IPC_NOWAIT | MSG_COPY would keep it; a plain receive takes it, so the writer sends again.
    if libc.msgrcv(queue, ctypes.byref(got), 256, 0, 0o4000) > 0:
        note("sysv_msg", got.text)
        if write:
            libc.msgsnd(queue, ctypes.byref(message), 256, 0o4000)


def sysv_sem(write):
    semaphores = libc.semget(KEY, 1, (0o1666 if write else 0))
    if failed("sysv_sem", semaphores):
        return
    if write and not failed("sysv_sem", libc.semctl(semaphores, 0, 16, 4242)):  # SETVAL
        planted.append("sysv_sem")
    if libc.semctl(semaphores, 0, 12) == 4242:  # GETVAL
        found.setdefault("sysv_sem", []).append(SECRET if write else "a planted value")


def posix_mq(write):
    flags = (0o100 | 0o2) if write else 0  # O_CREAT | O_RDWR, or O_RDONLY; O_NONBLOCK on both
    queue = libc.mq_open(NAME, flags | 0o4000, 0o666, None)
    if failed("posix_mq", queue):
        return
    if write and not failed("posix_mq", libc.mq_send(queue, SECRET.encode(), len(SECRET), 0)):
        planted.append("posix_mq")
    buffer = ctypes.create_string_buffer(8192)
    if libc.mq_receive(queue, buffer, 8192, None) > 0:
        note("posix_mq", buffer.raw)
        if write:
            libc.mq_send(queue, SECRET.encode(), len(SECRET), 0)


def keyrings(write):
    rings = dict(KEYRINGS)
    persistent = syscall(250, 22, -1, -4)  # KEYCTL_GET_PERSISTENT(own uid) into the user ring
    if not failed("keyring_persistent", persistent):
        rings["persistent"] = persistent
    for ring_name, ring in rings.items():
        channel = f"keyring_{ring_name}"
        if write:
            added = syscall(248, b"user", KEY_NAME, SECRET.encode(), len(SECRET),
                            ctypes.c_long(ring))
            if not failed(channel, added):
                planted.append(channel)
        key = syscall(250, 10, ctypes.c_long(ring), b"user", KEY_NAME, 0)  # KEYCTL_SEARCH
        if key > 0:
            buffer = ctypes.create_string_buffer(256)
            syscall(250, 11, ctypes.c_long(key), buffer, 256)  # KEYCTL_READ
            note(channel, buffer.raw)


SKIP = ("/proc", "/sys", "/dev/pts")


def walk_folders(limit=40000):
    seen = 0
    for top, folders, files in os.walk("/", onerror=lambda error: None):
        folders[:] = [f for f in folders if os.path.join(top, f) not in SKIP]
        seen += 1
        yield top, files
        if seen > limit:
            return


def files(write):
    if write:
        for top, _ in walk_folders():
            if os.access(top, os.W_OK):
                try:
                    with open(os.path.join(top, FILE), "w") as plant:
                        plant.write(SECRET)
                    planted.append(f"file:{top}")
                except OSError as error:
                    refused[f"file:{top}"] = error.strerror
    for top, names in walk_folders():
        if FILE in names:
            try:
                with open(os.path.join(top, FILE)) as plant:
                    note(f"file:{top}", plant.read())
            except OSError:
                found.setdefault(f"file:{top}", []).append("an unreadable plant")


class Span(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def memory():
    """Everything this process can read of its own memory, what a fork inherited included
    (process_vm_readv on itself: a page it cannot read is an error, not a crash)."""
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    with open("/proc/self/maps") as maps:
        spans = [line.split() for line in maps]
    for fields in spans:
        start, end = (int(value, 16) for value in fields[0].split("-"))
        if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
            continue
        for at in range(start, end, 1 << 20):
            size = min(1 << 20, end - at)
            buffer = ctypes.create_string_buffer(size)
            local, remote = Span(ctypes.addressof(buffer), size), Span(at, size)
            if libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote),
                                     1, 0) > 0:
                note("memory", buffer.raw)


writing = MODE == "write"
for channel in (sysv_shm, sysv_msg, sysv_sem, posix_mq, keyrings, files):
    try:
        channel(writing)
    except Exception as error:
        refused[channel.__name__] = repr(error)
memory()
print(json.dumps({"planted": planted, "refused": refused,
                  "found": {channel: sorted(set(tokens)) for channel, tokens in found.items()}}))
