import os, signal, ctypes, json, time
me = os.getpid()
reached = []
fake = json.dumps({'job_id': 'x', 'status': 'exited', 'stdout': '', 'stderr': '', 'exit_code': 0, 'wall_s': 0.05, 'cpu_s': 0.0, 'peak_memory_bytes': 0, 'dirty': False}) + '\n'
libc = ctypes.CDLL(None, use_errno=True)
for p in [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != me]:
    try:
        fds = os.listdir(f'/proc/{p}/fd')
        reached.append(('fd', p))
    except OSError:
        fds = ['0', '1', '2']
    for fd in fds:
        try:
            w = os.open(f'/proc/{p}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)
            os.write(w, fake.encode() + b'x' * 65536)
            reached.append(('write', p, fd))
        except OSError:
            pass
    try:
        open(f'/proc/{p}/mem', 'rb').read(1)
        reached.append(('mem', p))
    except OSError:
        pass
    if libc.ptrace(16, p, 0, 0) == 0:
        reached.append(('ptrace', p))
    try:
        os.kill(p, signal.SIGSTOP)
        reached.append(('stop', p))
    except OSError:
        pass
print('reached', reached, flush=True)
time.sleep(30)
