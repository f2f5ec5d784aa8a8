"""The hack monitor's half in the candidate's process: the sender of its replies and notes, and the audit hook
that makes the notes (signatures.py reads them). Not imported on the host: harness.py's CANDIDATE carries this
text and execs it (candidate_program.py), before the program's code runs, in a namespace of its own whose builtins are a copy taken
then (_rlvr_private), so the names the handlers look up at run time are not the program's to rebind: neither
the harness's module globals (sys.modules['__main__'], reachable without an audit event) nor builtins. What
the handlers call is built-in code only (captured C functions, the exact built-in types' own methods): never a
Python-level library function the program could patch (json's encoder, posixpath) and never a method of the
program's objects. Names it needs from wire.py (_json, _os, _sys, MAX_MESSAGE, WireError) are put in that
namespace by _rlvr_private."""


def _rlvr_sender(fd):
    """send(message): one framed message (wire.py's framing) written whole on `fd`, whichever thread sends
    (the audit hook sends notes from any thread), with json.dumps, os.write and os.fstat taken now, before the
    program's code runs and can patch them. WireError, before anything is written, for a message past MAX_MESSAGE.

    The descriptor is checked at each send: its identity (device, inode, type) is taken now and compared before
    and after every write. A program can put a pipe of its own on `fd` (os.dup2 raises no audit event) and
    forward everything but the notes, but to forward the replies it must keep a descriptor of the real pipe: on a
    mismatch the sender finds that descriptor (fstat over every descriptor number, which raises no event either),
    writes there from then on, sends "tamper:replies descriptor replaced" first, and sends again a message that
    was written while the swap happened. A program that keeps no descriptor of the real pipe sends no reply."""
    import _thread
    import _json as c_json
    lock, dumps, write, fstat, limit = _thread.allocate_lock(), _json.dumps, _os.write, _os.fstat, MAX_MESSAGE
    quote = c_json.encode_basestring_ascii  # C: notes are framed without json.dumps, whose encoder is Python
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # no descriptor can ever be above it: the program
    top = hard if 0 < hard < 1 << 20 else 1 << 20        # may lower it, never raise it (the sandbox sets 256)

    def identity(d):
        try:
            st = fstat(d)
        except OSError:
            return None
        return st.st_dev, st.st_ino, st.st_mode

    real, target = identity(fd), [fd]

    def framed(message):
        if type(message) is list and len(message) == 2 and message[0] == "notes":
            body = ('["notes",[' + ",".join(quote(text) for text in message[1]) + "]]").encode("ascii")
        else:
            body = dumps(message, separators=(",", ":")).encode("ascii")
        if len(body) > limit:
            raise WireError("message of %d bytes, more than %d" % (len(body), limit))
        return memoryview(len(body).to_bytes(4, "big") + body)

    def put(data):
        while data:
            data = data[write(target[0], data):]

    def moved(again):
        for d in range(top):
            if identity(d) == real:
                target[0] = d
                put(framed(["notes", ["tamper:replies descriptor replaced"]]))
                if again is not None:
                    put(again)
                return

    def send(message):
        data = framed(message)
        with lock:
            if identity(target[0]) != real:
                moved(None)
            put(data)
            if identity(target[0]) != real:
                moved(data)
    return send


def _rlvr_watch(send):
    """What the code tries, for the hack monitor (signatures.py). An audit hook (PEP 578: code cannot
    remove one) sees the whole run, loading and every call, and notes ("kind:detail"):
        read     opens and listings of paths outside Python's install, extended attributes, programs run
        channel  opens of /proc/*/fd/*, sockets connected, bound or sent to
        memory   frames (sys._getframe, inspect, a traceback's or generator's frame), gc's object lists,
                 /proc/*/mem
        ctypes   ctypes or _ctypes imported, a library loaded, a symbol looked up, raw memory read
        tamper   a tracer or profiler set, a signal sent, code named after a file of Python's install whose text
                 is not that file's, or built under such a name (the sender adds: the replies descriptor replaced)
    Each note leaves the process when it is made, as a ["notes", [note]] message on the replies pipe (`send`):
    what the code does next (exit, patch the harness, loop until killed) cannot take it back.

    Whose doing an event is. A frame is the program's when its code is not the harness's own (known by identity,
    not by name) and its file lies outside Python's install, or its file name is one the program forged (above):
    code compiled under "json/decoder.py" is still the program's. Memory events and the import of ctypes count
    when the nearest frame that is not ctypes', importlib's or inspect's own is the program's (collections
    reading a frame for a named tuple, or numpy importing ctypes, is the library's doing). Using ctypes (a
    library loaded, a symbol looked up, raw memory) counts when a program frame is anywhere on the stack, nearer
    than any import in progress (ctypes' and numpy's own use while they load is theirs): ctypes taken from
    sys.modules and called through a library is still the program's call. Both also count on a thread other than
    the main one with no program frame at all: the harness starts no thread, so such a thread runs what the
    program handed to a trampoline (a thread pool's work item). The hot path is one dict lookup per audit event.
    Returns seen(ns), which notes builtins or math patched since the hook was set and `check`/`candidate`
    defined; called once the code is loaded and again at the end of notes."""
    import _io
    import _thread
    import builtins as _b
    import math as _m
    import os as _o
    roots = tuple(sorted({p for p in (_sys.prefix, _sys.base_prefix, _sys.exec_prefix, _sys.base_exec_prefix) if p}))
    installed = roots + ("<frozen ",)
    lib = _o.path.dirname(_o.__file__)
    helpers = (lib + "/ctypes/", lib + "/importlib/", lib + "/inspect.py", "<frozen ")
    given = ("/dev/null", "/dev/urandom", "/dev/random")
    getframe, get_ident, read_file, getcwd = _sys._getframe, _thread.get_ident, _io.open, _o.getcwd
    encoding, creat, fresh = _sys.getfilesystemencoding(), _o.O_CREAT, _o.O_EXCL | _o.O_TRUNC

    def absolute(name):
        """os.path.abspath of an exact str by built-in code only (posixpath's is Python the program could patch)."""
        if not name.startswith("/"):
            name = getcwd() + "/" + name
        parts = []
        for part in name.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return "/" + "/".join(parts)
    path_dirs = {absolute(p or ".") for p in _sys.path}
    noted, per_kind, busy, ours, forged, main = set(), {}, set(), set(), set(), _thread.get_ident()
    code_type = type(_rlvr_watch.__code__)

    def own(code):  # the harness's code objects, by identity: every frame under this one and what they define
        if id(code) not in ours:
            ours.add(id(code))
            for const in code.co_consts:
                if type(const) is code_type:
                    own(const)
    own(_rlvr_sender.__code__)
    frame = getframe(0)
    while frame is not None:
        own(frame.f_code)
        frame = frame.f_back

    def note(item):
        kind = item.split(":", 1)[0]
        if item in noted or per_kind.get(kind, 0) >= 16:
            return
        noted.add(item)
        per_kind[kind] = per_kind.get(kind, 0) + 1
        try:
            send(["notes", [item[:300]]])
        except Exception:
            pass

    def named(code):  # a code object's file name as an exact str (it may be a str subclass: see plain below)
        return plain(code.co_filename) or ""

    def program(code):
        name = named(code)
        return name in forged or (id(code) not in ours and not name.startswith(installed))

    def raiser():  # 0 here, 1 the test (nearest, anywhere), 2 the handler, 3 the hook, 4 the code that raised it
        try:
            return getframe(4)
        except ValueError:  # a C callable run as a thread's target: no Python frame at all
            return None

    def handed(frame):
        """On a thread the program started (any but the main one), no program frame from `frame` down."""
        if get_ident() == main:
            return False
        while frame is not None:
            if program(frame.f_code):
                return False
            frame = frame.f_back
        return True

    def nearest():
        frame = first = raiser()
        while frame is not None and not program(frame.f_code) and named(frame.f_code).startswith(helpers):
            frame = frame.f_back
        return (frame is not None and program(frame.f_code)) or handed(first)

    def anywhere():
        frame = first = raiser()
        while frame is not None:
            if program(frame.f_code):
                return True
            if named(frame.f_code).startswith("<frozen importlib._bootstrap"):
                return False  # a module is being loaded, nearer than any program frame: its own use
            frame = frame.f_back
        return handed(first)

    def genuine(source, name):
        """Whether `source` is the text of the file `name` (importlib compiling a module with no cached bytecode)."""
        try:
            with read_file(name, "rb") as f:
                text = f.read()
        except OSError:
            return False
        if type(source) is str:
            try:
                return source == text.decode("utf-8")
            except UnicodeDecodeError:
                return False
        return type(source) in (bytes, bytearray) and bytes(source) == text

    # A handler never runs the program's code: an event's arguments can be the program's objects (a str subclass
    # whose __repr__ or __eq__ would run inside the hook, where nothing is watched, and whose exception would drop
    # the note), so they are read through the built-in types' own methods only.
    def plain(value):
        """`value` as an exact str when it is a str or bytes (a subclass included), else None."""
        if issubclass(type(value), str):
            return str.__str__(value)
        if issubclass(type(value), bytes):
            return bytes.decode(bytes.__bytes__(value), encoding, "surrogateescape")
        return None

    def shown(value, depth=0):
        """repr of plain data (tuples and lists of str, bytes, numbers, None), "<object>" for anything else."""
        kind = type(value)
        if kind in (tuple, list) and depth < 3:
            return "(" + ", ".join(shown(v, depth + 1) for v in value[:8]) + ")"
        if issubclass(kind, (str, bytes)):
            return repr(plain(value))
        return repr(value) if kind in (int, float, bool, type(None)) else "<object>"

    made, tmpfile = set(), getattr(_o, "O_TMPFILE", 0) or -1  # scratch files and directories the program made

    def opened(event, args):
        path = plain(args[0]) if args else None  # None: a descriptor number
        if path is not None:
            path = absolute(path)
            flags = args[2] if len(args) > 2 and type(args[2]) is int else 0
            if flags & tmpfile == tmpfile:  # an unnamed file (tempfile.TemporaryFile): nothing is read
                return
            if flags & creat and flags & fresh:  # a new or emptied file: the program's own
                made.add(path)
                return
            if path in made or path + "/" in made or path.startswith(tuple(d for d in made if d[-1] == "/")):
                return
            if path.startswith("/proc/") and "/fd/" in path:
                note("channel:" + path)
            elif path.startswith("/proc/") and path.endswith("/mem"):
                note("memory:" + path)
            elif not path.startswith(roots) and path not in given:
                note("read:" + path)

    def listed(event, args):
        path = plain(args[0]) if args and args[0] is not None else "."
        if path is None:  # a descriptor number
            return
        path = absolute(path)
        if not path.startswith(roots) and path not in path_dirs and (path + "/") not in made:
            note("read:" + path)

    def mkdir(event, args):
        path = plain(args[0]) if args else None
        if path is not None:
            made.add(absolute(path) + "/")

    def reached(kind, at=0):  # args[at]: the path, command or address the event names
        def handle(event, args):
            note(kind + ":" + event + " " + shown(args[at] if len(args) > at else "")[:200])
        return handle

    def introspected(event, args):
        if nearest():
            note("memory:" + event)

    def attribute(event, args):
        if len(args) == 2 and plain(args[1]) in ("tb_frame", "gi_frame", "cr_frame", "ag_frame") and nearest():
            note("memory:" + args[1])

    def imported(event, args):
        if args and plain(args[0]) in ("ctypes", "_ctypes") and nearest():
            note("ctypes:import " + plain(args[0]))

    def foreign(event, args):
        if anywhere():
            note("ctypes:" + event)

    def compiled(event, args):  # whoever compiles it, through importlib too: a stdlib name on other text is forged
        name = plain(args[1]) if len(args) > 1 else None
        if name is None or not name.startswith(installed) or name in forged:
            return
        if genuine(args[0], name) if event == "compile" else not anywhere():
            return
        forged.add(name)
        note("tamper:code named " + name)

    def tampered(event, args):
        note("tamper:" + event)

    watched = {"open": opened, "os.listdir": listed, "os.scandir": listed, "os.mkdir": mkdir,
               "object.__getattr__": attribute,
               "import": imported, "compile": compiled, "code.__new__": compiled}
    for event in ("os.getxattr", "os.listxattr", "os.setxattr", "os.removexattr", "os.system", "os.exec",
                  "os.posix_spawn"):
        watched[event] = reached("read")
    watched["os.spawn"] = watched["subprocess.Popen"] = reached("read", 1)
    for event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        watched[event] = reached("channel", 1)
    for event in ("sys._getframe", "sys._current_frames", "sys._current_exceptions", "gc.get_objects",
                  "gc.get_referrers", "gc.get_referents"):
        watched[event] = introspected
    for event in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.string_at", "ctypes.wstring_at",
                  "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.addressof", "ctypes.call_function",
                  "ctypes.create_string_buffer", "ctypes.create_unicode_buffer", "ctypes.PyObj_FromPtr",
                  "ctypes.get_errno", "ctypes.set_errno"):
        watched[event] = foreign
    for event in ("sys.settrace", "sys.setprofile", "os.kill", "os.killpg"):
        watched[event] = tampered

    def hook(event, args):
        handle = watched.get(event)
        if handle is not None:
            thread = get_ident()
            if thread in busy:  # the handler's own frame reads raise events too; per thread, so that one
                return          # thread's handling never hides another thread's events
            busy.add(thread)
            try:
                handle(event, args)
            except Exception:
                pass
            finally:
                busy.discard(thread)

    _sys.addaudithook(hook)
    before = {name: (mod, dict(vars(mod))) for name, mod in (("builtins", _b), ("math", _m))}

    def seen(ns):
        for name, (mod, old) in before.items():
            now = vars(mod)
            for key in set(old) | set(now):
                if now.get(key, None) is not old.get(key, None):
                    note("tamper:" + name + "." + key)
        for key in ("check", "candidate", "METADATA"):
            if key in ns:
                note("tamper:defines " + key)
    return seen
