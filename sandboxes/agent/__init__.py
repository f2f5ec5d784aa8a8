"""The supervisor that runs inside every sandbox, as root: it reads jobs on stdin, runs each program (and its
checker) under limits as an unprivileged user, resets what the run left, and replies with one JSON line per job.

Both backends start it as `python3 -I -S -c SOURCE CONFIG`, where SOURCE (base.agent_source()) is this package's
files as ONE program text, joined in this order, each needing only the ones before it:

1. reset.py: what one run leaves the next must not see (workdir, /tmp, /dev/shm, IPC, keyrings) and the cgroup reader;
2. counters.py: counters a program can read, scrambled before every run;
3. clock.py: the run clock, which time counts against a program's limits;
4. process.py: fork and exec under limits, supervise, kill and reap;
5. supervisor.py: the job loop and the reply.

So each file is standard library only, with no `from __future__` and no rlvr import, save a `try: from
rlvr.sandboxes.agent.X import ...; except ImportError: pass` that lets the host (the tests) import it as a module;
inside the sandbox the names come from the text before it. Nothing is imported here, so importing one module of
the package on the host (base.py reads clock.BACKSTOP) loads no other.
"""
