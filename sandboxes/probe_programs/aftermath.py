# sandboxes/probes.py sets the lines up to the blank one (_program): the state places, keyctl(2)'s syscall number
# on this machine, and the name of the key the state probe adds.
PLACES = ('/tmp', '/var/tmp', '/dev/shm', '/run/lock', '/dev/mqueue')
KEYCTL = 250
KEY_NAME = 'rlvr-probe-key'

import os
me, parent = os.getpid(), os.getppid()
others = []
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) not in (1, me, parent):
        try:
            state = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0]
        except OSError:
            continue
        if state != 'Z':
            others.append(open(f'/proc/{p}/cmdline').read())
print('others', others)
print('files', sorted(os.listdir('.')), sorted(f for f in os.listdir('/tmp') if f != 'sandbox'))
def ls(d):
    try:
        return os.listdir(d)
    except OSError:
        return []
state = [d + '/' + f for d in PLACES for f in ls(d) if f.startswith('rlvr-probe')]
for kind in ('shm', 'msg', 'sem'):
    try:
        if len(open('/proc/sysvipc/' + kind).read().splitlines()) > 1:
            state.append('sysv ' + kind)
    except OSError:
        pass
for d in ('.', '..', os.path.expanduser('~')) + PLACES:
    try:
        if any(a.startswith('user.rlvr-probe') for a in os.listxattr(d)):
            state.append('xattr ' + d)
    except OSError:
        pass
import ctypes
libc = ctypes.CDLL(None)
if libc.syscall(KEYCTL, 10, -4, b'user', KEY_NAME.encode(), 0) >= 0:
    state.append('keyring')
ring = libc.syscall(KEYCTL, 22, -1, -2)
if ring >= 0 and libc.syscall(KEYCTL, 10, ring, b'user', KEY_NAME.encode(), 0) >= 0:
    state.append('persistent keyring')
print('state', state)
