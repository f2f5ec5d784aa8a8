# sandboxes/probes.py sets the lines up to the blank one (_program): the marker of this run, the writable places,
# add_key(2)'s and keyctl(2)'s syscall numbers on this machine, and the key's name.
marker = 'rlvr-probe-x'
WRITABLE = ('/tmp', '/var/tmp', '/dev/shm', '/run/lock', '/dev/mqueue', '.')
ADD_KEY = 248
KEYCTL = 250
KEY_NAME = 'rlvr-probe-key'

import os, ctypes
for d in WRITABLE + (os.path.expanduser('~'),):
    try:
        open(os.path.join(d, marker), 'w').write('cached answer')
        print('left', d)
    except OSError as e:
        print('refused', d, e.errno)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0x5EED, 32 << 20, 0o1666)
if shm >= 0:
    addr = libc.shmat(shm, None, 0)
    if addr not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(addr, 1, 32 << 20)
        libc.shmdt(ctypes.c_void_p(addr))
print('sysv', shm, libc.msgget(0x5EED, 0o1666), libc.semget(0x5EED, 1, 0o1666))
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
print('mq', libc.mq_open(('/' + marker).encode(), os.O_CREAT | os.O_RDWR, 0o666, None), ctypes.get_errno())
print('key', libc.syscall(ADD_KEY, b'user', KEY_NAME.encode(), b'cached', 6, -4))
ring = libc.syscall(KEYCTL, 22, -1, -2)  # the uid's persistent keyring, which outlives every process
print('persistent', ring,
      libc.syscall(ADD_KEY, b'user', KEY_NAME.encode(), b'cached', 6, ring) if ring >= 0 else ctypes.get_errno())
