# sandboxes/probes.py sets the lines up to the blank one (_program): the marker of this run and the state places.
marker = 'rlvr-probe-x'
PLACES = ('/tmp', '/var/tmp', '/dev/shm', '/run/lock', '/dev/mqueue')

import os, struct
marked = []
for d in ('.', '..', os.path.expanduser('~')) + PLACES:
    for step in (lambda: os.setxattr(d, 'user.' + marker, b'cached answer'),
                 # no access for anyone, as a default ACL: files written into the directory later would inherit it
                 lambda: os.setxattr(d, 'system.posix_acl_default', struct.pack('<I', 2)
                                    + b''.join(struct.pack('<HHI', tag, 0, 0xFFFFFFFF) for tag in (1, 4, 0x20))),
                 lambda: os.chmod(d, 0)):
        try:
            step()
            marked.append(d)
        except OSError:
            pass
print('marked', sorted(set(marked)))
