"""The program of a PythonSession call (session.py says why and what it guarantees): it reads the cells from
fd 3 one at a time and acknowledges each on fd 4. A message is `<nonce> <show 0|1> <length>\n` then the cell's
UTF-8 source; an acknowledgement `<nonce> ok|error\n`. No json, no ast.parse (it looks `compile` up when called):
only functions bound here, before any cell ran.

Standard library only; session.py ships this file's text as the sandbox's `main.py` (`python3 -I -B main.py`,
so __name__ is "__main__"). Importing it on the host runs nothing."""

def _main():
    import ast, builtins, os, sys, traceback, types
    read, write, dup, dup2, close, exit_ = os.read, os.write, os.dup, os.dup2, os.close, os._exit
    ONLY_AST, Expr, Expression = ast.PyCF_ONLY_AST, ast.Expr, ast.Expression
    compile_, exec_, eval_, repr_, isinstance_, type_, int_ = compile, exec, eval, repr, isinstance, type, int
    format_exception, Base, stdout, stderr = traceback.format_exception, BaseException, sys.stdout, sys.stderr
    module = types.ModuleType("__main__")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    namespace = module.__dict__
    null = os.open(os.devnull, os.O_WRONLY)
    pending = [b""]

    def take(size):
        while len(pending[0]) < size:
            chunk = read(3, 1 << 20)
            if not chunk:
                return None
            pending[0] += chunk
        out, pending[0] = pending[0][:size], pending[0][size:]
        return out

    def receive():
        while b"\n" not in pending[0]:
            chunk = read(3, 1 << 20)
            if not chunk:
                return None
            pending[0] += chunk
        head, _, pending[0] = pending[0].partition(b"\n")
        nonce, show, size = head.split(b" ")
        source = take(int_(size))
        return None if source is None else (nonce, show == b"1", source.decode("utf-8", "surrogatepass"))

    def put(fd, data):
        while data:
            data = data[write(fd, data):]

    def flush():
        for stream in (sys.stdout, sys.stderr, stdout, stderr):
            try:
                stream.flush()
            except Base:
                pass

    def run(source, show):
        tree = compile_(source, "<cell>", "exec", ONLY_AST)
        last = tree.body.pop() if show and tree.body and isinstance_(tree.body[-1], Expr) else None
        exec_(compile_(tree, "<cell>", "exec"), namespace)
        if last is not None:
            value = eval_(compile_(Expression(last.value), "<cell>", "eval"), namespace)
            if value is not None:
                text = repr_(value)
                flush()
                put(1, (text + "\n").encode("utf-8", "backslashreplace"))

    put(4, b"ready %d\n" % os.getpid())
    while True:
        message = receive()
        if message is None:
            break
        nonce, show, source = message
        ok = True
        if not show:
            flush()
            saved = dup(1), dup(2)
            dup2(null, 1)
            dup2(null, 2)
        try:
            run(source, show)
        except Base as error:
            ok = False
            if show:
                flush()
                lines = format_exception(type_(error), error, error.__traceback__)
                text = lines[0] + "".join(l for l in lines[1:] if 'File "<cell>"' in l or not l.startswith("  File"))
                put(2, text.encode("utf-8", "backslashreplace"))
        flush()
        if not show:
            dup2(saved[0], 1)
            dup2(saved[1], 2)
            close(saved[0])
            close(saved[1])
        put(4, nonce + (b" ok\n" if ok else b" error\n"))
        if not ok:
            break
    exit_(0)


if __name__ == "__main__":
    _main()
