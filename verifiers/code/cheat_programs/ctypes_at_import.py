import ctypes
libc = ctypes.CDLL('libc.so.6')
libc.getpid()
raw = ctypes.string_at(id('check'), 64)
buf = ctypes.create_string_buffer(64)
ctypes.memmove(buf, id('check'), 64)
ctypes.pythonapi.Py_IncRef(ctypes.py_object(raw))
def sq(x):
    return 0
