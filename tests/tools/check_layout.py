"""Check a pybpfprof CPython layout against the interpreter running this script.

Usage: python3.X check_layout.py LAYOUT_JSON   (or python -c "$(cat check_layout.py)" JSON)

LAYOUT_JSON is what tests/unit/test_layout.cpp writes for a pbp::cpython::Layout. The script
reads its own process memory through ctypes at those offsets and compares what it finds with
what the interpreter itself reports (C API, sys._getframe(), id() of objects, ...).
It walks frames exactly as bpf/pybpfprof.bpf.c does. Runs on CPython 3.6 and later.
Prints one line per failure and "checks: N failures: M"; exits 1 if anything failed.
"""
import ctypes
import json
import sys
import sysconfig
import threading
import types

L = json.loads(sys.argv[1])
B = L["bpf"]
O = L["obj"]
NONE = 0xFFFF
FRAME_OBJECT, FRAME_INTERP_CFRAME, FRAME_INTERP = 1, 2, 3
LASTI_BYTES, LASTI_UNITS, INSTR_PTR = 1, 2, 3

api = ctypes.pythonapi
VP = ctypes.c_void_p


def cfunc(name, restype, *argtypes):
    f = getattr(api, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


PyThreadState_Get = cfunc("PyThreadState_Get", VP)
PyInterpreterState_Head = cfunc("PyInterpreterState_Head", VP)
PyInterpreterState_Next = cfunc("PyInterpreterState_Next", VP, VP)
PyInterpreterState_ThreadHead = cfunc("PyInterpreterState_ThreadHead", VP, VP)
PyThreadState_Next = cfunc("PyThreadState_Next", VP, VP)


def u64(a):
    return ctypes.c_uint64.from_address(a).value


def i64(a):
    return ctypes.c_int64.from_address(a).value


def u32(a):
    return ctypes.c_uint32.from_address(a).value


def i32(a):
    return ctypes.c_int32.from_address(a).value


def u8(a):
    return ctypes.c_uint8.from_address(a).value


failures = []
nchecks = [0]


def check(cond, msg):
    nchecks[0] += 1
    if not cond:
        failures.append(msg)
    return cond


def eq(what, got, want):
    return check(got == want, "%s: got %r, want %r" % (what, got, want))


notes = []

# ---- version ----------------------------------------------------------------------------
eq("py_version_hex", B["py_version_hex"], sys.hexversion)
ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
eq("free_threaded", bool(B["free_threaded"]), ft)
eq("layout.free_threaded", bool(L["free_threaded"]), ft)

# ---- interpreters and threads ---------------------------------------------------------------
stop = threading.Event()


def worker(ready):
    ready.set()
    stop.wait()


threads = []
for _ in range(2):
    ready = threading.Event()
    t = threading.Thread(target=worker, args=(ready,))
    t.daemon = True  # never keep the process alive on a failure
    t.start()
    ready.wait()
    threads.append(t)

# A second interpreter makes interp_next non-NULL (3.8+: _xxsubinterpreters, 3.13+: _interpreters).
sub_mod, sub_id, sub_errors = None, None, []
for modname in ("_interpreters", "_xxsubinterpreters"):
    try:
        sub_mod = __import__(modname)
        sub_id = sub_mod.create()
        break
    except Exception as e:  # not built, or refused
        sub_errors.append("%s: %r" % (modname, e))
        sub_mod = None
if sub_mod is None:
    notes.append("no subinterpreter, interp_next only checked as NULL (%s)" % "; ".join(sub_errors))

head = PyInterpreterState_Head() or 0
check(head != 0, "PyInterpreterState_Head() is NULL")
if L["runtime_interp_head"] is not None:
    rt = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
    eq("_PyRuntime+runtime_interp_head", u64(rt + L["runtime_interp_head"]), head)
else:
    check(sys.version_info < (3, 7), "runtime_interp_head missing for >= 3.7")

interps = []
i = head
while i and len(interps) < 64:
    interps.append(i)
    nxt = PyInterpreterState_Next(i) or 0
    eq("interp_next of %#x" % i, u64(i + B["interp_next"]), nxt)
    i = nxt
if sub_mod is not None:
    check(len(interps) >= 2, "subinterpreter created but only %d interpreter(s) listed" % len(interps))

cur = PyThreadState_Get()
eq("thread_id of current tstate", u64(cur + B["tstate_thread_id"]), threading.get_ident())
main_tids = None
for interp in interps:
    th = PyInterpreterState_ThreadHead(interp) or 0
    eq("interp_threads_head of %#x" % interp, u64(interp + B["interp_threads_head"]), th)
    ts, tids, found_cur = th, [], False
    while ts and len(tids) < 4096:
        nxt = PyThreadState_Next(ts) or 0
        eq("tstate_next of %#x" % ts, u64(ts + B["tstate_next"]), nxt)
        tids.append(u64(ts + B["tstate_thread_id"]))
        found_cur = found_cur or ts == cur
        ts = nxt
    if found_cur:
        main_tids = tids
check(main_tids is not None, "current tstate not found on any interpreter's thread list")
if main_tids is not None:
    want = sorted(t.ident for t in threading.enumerate())
    eq("thread ids on the thread list", sorted(main_tids), want)

# 3.14+: interp_code_gen, PyInterpreterState._code_object_generation, counts code objects freed
# (BPF reuses code checksums while it stands still): it must move by exactly the code objects
# freed (compile() itself frees some of its own on the way).
if B.get("interp_code_gen", NONE) != NONE:
    me = cfunc("PyInterpreterState_Get", VP)()
    made = [compile("x = %d" % i, "<gen>", "exec") for i in range(5)]
    g0 = u64(me + B["interp_code_gen"])
    del made
    eq("code generation after freeing 5 code objects", u64(me + B["interp_code_gen"]) - g0, 5)
else:
    check(sys.version_info < (3, 14) or sys.version_info >= (3, 16),
          "3.14/3.15 without interp_code_gen")

# ---- the GIL -------------------------------------------------------------------------------
# During a ctypes call (which releases the GIL; the other threads wait on an Event) locked
# reads 0. Back in Python this thread holds it again: locked == 1 and last_holder is its
# thread state. (Not before the call: in 3.7 .. 3.11 creating the subinterpreter above swaps
# thread states without releasing the shared GIL, which leaves last_holder naming the
# subinterpreter's state until the next take_gil.) Free-threaded builds have no GIL location.
GIL_WHERE_NONE, GIL_WHERE_ADDR, GIL_WHERE_INTERP, GIL_WHERE_STATICS = 0, 1, 2, 3
gw = B["gil_where"]
if gw == GIL_WHERE_NONE:
    check(ft or sys.version_info < (3, 7), "no GIL location for a default build >= 3.7")
elif gw == GIL_WHERE_STATICS:
    # 3.6: static variables whose addresses are the process's (its ELF symbol table, read when
    # a process is registered), not the layout's: Gil.LiveProcessGilReadFromUserspace checks them
    # on a live 3.6.
    check(sys.version_info[:2] == (3, 6), "gil_where STATICS for a version other than 3.6")
else:
    check(not ft, "a GIL location for a free-threaded build")
    if gw == GIL_WHERE_ADDR:
        check(L["runtime_gil"] is not None, "gil_where ADDR without runtime_gil")
        gil = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime")) + (L["runtime_gil"] or 0)
    else:
        gil = u64(cfunc("PyInterpreterState_Get", VP)() + B["interp_gil_ptr"])
    check(gil != 0, "GIL address is NULL")
    if gil:
        libc = ctypes.CDLL(None)
        libc.memcpy.restype = VP
        libc.memcpy.argtypes = [VP, VP, ctypes.c_size_t]
        seen = ctypes.c_int(7)
        libc.memcpy(ctypes.addressof(seen), gil + B["gil_locked"], 4)
        eq("gil.locked during a ctypes call (released)", seen.value, 0)
        eq("gil.locked (held by this thread)", i32(gil + B["gil_locked"]), 1)
        eq("gil.last_holder", u64(gil + B["gil_last_holder"]), cur)

# ---- frames -------------------------------------------------------------------------------
code_type = id(types.CodeType)
tag_mask = B["executable_tag_mask"]


def walk(fp, pyframe):
    """Walk the frame chain from fp the way BPF does; compare with the Python frames."""
    mem = []
    skipped = []  # (owner, raw f_executable) of frames skipped by skip_owner_mask
    f, n = fp, 0
    while f and n < 1000:
        n += 1
        prev = u64(f + B["frame_previous"])
        owner = None
        if B["frame_owner"] != NONE:
            owner = u8(f + B["frame_owner"])
            if owner < 32 and (B["skip_owner_mask"] >> owner) & 1:
                skipped.append((owner, u64(f + B["frame_code"])))
                f = prev
                continue
        code = u64(f + B["frame_code"]) & ~tag_mask
        if code and u64(code + B["code_ob_type"]) == code_type:
            if B["instr_kind"] == INSTR_PTR:
                instr = u64(f + B["frame_instr"])
            else:
                instr = i32(f + B["frame_instr"])
            mem.append((code, instr, owner))
        f = prev
    py = []
    p = pyframe
    while p is not None:
        py.append(p)
        p = p.f_back
    eq("frame chain depth", len(mem), len(py))
    for k, (m, p) in enumerate(zip(mem, py)):
        co = p.f_code
        if not eq("frame %d code (%s)" % (k, co.co_name), m[0], id(co)):
            break
        nbytes = len(co.co_code)
        if B["instr_kind"] == LASTI_BYTES:
            off = m[1]
        elif B["instr_kind"] == LASTI_UNITS:
            off = m[1] * 2
        else:
            off = m[1] - (m[0] + B["code_adaptive"])
        eq("frame %d (%s) instruction byte offset" % (k, co.co_name), off, p.f_lasti)
        check(0 <= off < nbytes, "frame %d instruction offset %d outside co_code (%d)" % (k, off, nbytes))
        if m[2] is not None:
            # FRAME_OWNED_BY_THREAD = 0, FRAME_OWNED_BY_GENERATOR = 1 (3.11+)
            eq("frame %d (%s) owner" % (k, co.co_name), m[2], 1 if co is gen.__code__ else 0)
    if sys.version_info >= (3, 12):
        # 3.12: trampoline entry frames (CSTACK); 3.13: entry frames running Py_None (CSTACK);
        # 3.14+: entry frames (INTERPRETER) whose f_executable is the tagged PyStackRef_None
        check(len(skipped) >= 2, "expected C-stack/entry frames to skip, saw %r" % (skipped,))
    if sys.version_info >= (3, 13):
        for owner, raw in skipped:
            eq("entry frame (owner %d) executable" % owner, raw & ~tag_mask, id(None))
    if tag_mask:
        check(any(raw & tag_mask for _, raw in skipped),
              "no tagged f_executable seen: executable_tag_mask untested")
    return len(mem)


def check_entry(cf, fp):
    """3.11/3.12: the frames this eval loop call runs (check_frames, middle, gen: it was entered
    by next() from C) end at the entry frame, which links to cframe->previous->current_frame:
    outer's frame. BPF checks exactly this to spot a cframe that is not settled yet."""
    pcf = u64(cf + B["cframe_previous"])
    if not check(pcf != 0, "cframe.previous is NULL under a running frame"):
        return
    expect = u64(pcf + B["cframe_current_frame"])
    eq("cframe->previous->current_frame's code", u64(expect + B["frame_code"]), id(outer.__code__))
    f, n, above = fp, 0, 0
    while f and n < 1000:
        n += 1
        prev = u64(f + B["frame_previous"])
        owner = u8(f + B["frame_owner"])
        if not (owner < 32 and (B["skip_owner_mask"] >> owner) & 1):
            above += 1
        if u8(f + B["frame_entry_off"]) == B["frame_entry_val"]:
            eq("entry frame's previous", prev, expect)
            eq("Python frames down to the entry frame", above, 3)
            return
        f = prev
    check(False, "no entry frame in the chain")


def check_root_cframe(ts, cf):
    """3.11/3.12: following cframe->previous from tstate->cframe ends at tstate->root_cframe,
    the one cframe with neither a frame nor a previous cframe (BPF tells a thread without
    Python frames from an unsettled cframe by it)."""
    root = ts + B["tstate_root_cframe"]
    n = 0
    while cf and n < 1000:
        n += 1
        cur, prev = u64(cf + B["cframe_current_frame"]), u64(cf + B["cframe_previous"])
        if prev == 0:
            eq("the last cframe (tstate.root_cframe)", cf, root)
            eq("root cframe's current_frame", cur, 0)
            check(n >= 2, "expected nested cframes, saw %d" % n)
            return
        check(cur != 0, "a cframe with a previous one but no frame")
        cf = prev
    check(False, "cframe chain does not end")


def check_frames():
    ts = PyThreadState_Get()
    # no Python-level call between here and sys._getframe(): this frame is the current one
    fp = ctypes.c_uint64.from_address(ts + B["tstate_frame"]).value
    if B["frame_kind"] == FRAME_INTERP_CFRAME:
        cf = fp
        fp = ctypes.c_uint64.from_address(cf + B["cframe_current_frame"]).value
        if B["frame_entry_off"] != NONE:
            check_entry(cf, fp)
            check_root_cframe(ts, cf)
        else:
            check(False, "3.11/3.12 layout without the eval loop entry check")
    else:
        eq("frame_entry_off", B["frame_entry_off"], NONE)
    me = sys._getframe()
    return walk(fp, me)


def middle():
    return check_frames()


def gen():
    yield middle()


def outer():
    return next(gen())


depth = outer()
check(depth >= 5, "frame walk found only %d frames" % depth)
notes.append("frame walk matched %d frames" % depth)

# ---- code objects ---------------------------------------------------------------------------
# a non-ASCII identifier with a character outside the BMP (U+20BB7, stable under NFKC)
FNAME = "\u0192\U00020bb7nc"
ns = {}
exec(compile("def " + FNAME + "(x):\n    def inner():\n        return x\n    return inner\n",
             "/tmp/\u00e9t\u00e9/mod\u00fcle.py", "exec"), ns)
codes = [check_frames.__code__, ns[FNAME].__code__, ns[FNAME](1).__code__]
lt_attr = "co_lnotab" if L["line_format"] == "lnotab" else "co_linetable"


def check_code(co):
    a = id(co)
    eq("code_ob_type", u64(a + B["code_ob_type"]), code_type)
    eq("co_name of %s" % co.co_name, u64(a + O["co_name"]), id(co.co_name))
    eq("co_filename of %s" % co.co_name, u64(a + O["co_filename"]), id(co.co_filename))
    if O["co_qualname"] != NONE:
        eq("co_qualname of %s" % co.co_name, u64(a + O["co_qualname"]), id(co.co_qualname))
    else:
        check(sys.version_info < (3, 11), "co_qualname missing for >= 3.11")
    eq("co_firstlineno of %s" % co.co_name, i32(a + O["co_firstlineno"]), co.co_firstlineno)
    eq("%s of %s" % (lt_attr, co.co_name), u64(a + O["co_linetable"]), id(getattr(co, lt_attr)))


for co in codes:
    check_code(co)

# checksum slots: co_name, co_filename, co_firstlineno, then co_version (3.12+) or line table
slots = [(B["csum_off"][k], B["csum_size"][k]) for k in range(4)]
eq("csum slot 0 (co_name)", slots[0], (O["co_name"], 8))
eq("csum slot 1 (co_filename)", slots[1], (O["co_filename"], 8))
eq("csum slot 2 (co_firstlineno)", slots[2], (O["co_firstlineno"], 4))
if sys.version_info >= (3, 12):
    check(slots[3][1] == 4, "csum slot 3 should be co_version (4 bytes) on >= 3.12")
    off = slots[3][0]
    base = codes[1]
    c1 = base.replace()
    c2 = base.replace()
    c3 = base.replace()
    v1, v2, v3 = u32(id(c1) + off), u32(id(c2) + off), u32(id(c3) + off)
    # co_version comes from a counter bumped once per code object created
    check(v1 != 0 and v2 == v1 + 1 and v3 == v2 + 1,
          "csum slot 3 at %d is not co_version: %d %d %d" % (off, v1, v2, v3))
else:
    eq("csum slot 3 (line table)", slots[3], (O["co_linetable"], 8))
check(all(off + size <= B["code_read_len"] for off, size in slots if size),
      "code_read_len does not cover the checksum fields")

# ---- bytes --------------------------------------------------------------------------------
for b in (b"", b"abc", bytes(bytearray(range(256))) + b"tail"):
    a = id(b)
    eq("bytes ob_size", i64(a + O["bytes_size"]), len(b))
    eq("bytes ob_sval", ctypes.string_at(a + O["bytes_sval"], len(b) + 1), b + b"\0")

# ---- str ----------------------------------------------------------------------------------
def fresh(cps):
    # built at run time: not interned, no cached UTF-8
    return "".join(chr(c) for c in cps)


samples = [
    fresh([0x68, 0x65, 0x6C, 0x6C, 0x6F]),            # hello (ascii)
    fresh([0x63, 0x61, 0x66, 0xE9]),                  # cafe with e-acute (latin-1)
    fresh([0x41F, 0x440, 0x438, 0x432, 0x435, 0x442]),  # Privet (UCS-2)
    fresh([0x65E5, 0x672C, 0x8A9E]),                  # CJK (UCS-2)
    fresh([0x192, 0x1D518, 0x6E, 0x63]),              # f-hook, fraktur U (UCS-4)
    fresh([0x1F600, 0x78]),                           # emoji (UCS-4)
]
shift, cbit, abit = O["state_kind_shift"], O["state_compact_bit"], O["state_ascii_bit"]
for s in samples:
    a = id(s)
    mx = max(ord(c) for c in s)
    kind = 1 if mx < 0x100 else 2 if mx < 0x10000 else 4
    is_ascii = mx < 0x80
    eq("str length of %r" % s, i64(a + O["unicode_length"]), len(s))
    st = u32(a + O["unicode_state"])
    eq("state.kind of %r" % s, (st >> shift) & 7, kind)
    eq("state.compact of %r" % s, (st >> cbit) & 1, 1)
    eq("state.ascii of %r" % s, (st >> abit) & 1, int(is_ascii))
    hdr = O["unicode_ascii_size"] if is_ascii else O["unicode_compact_size"]
    codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
    eq("str data of %r" % s, ctypes.string_at(a + hdr, (len(s) + 1) * kind), (s + "\0").encode(codec))
    # sys.getsizeof of a compact str without cached UTF-8 is header + (len + 1) * kind
    eq("sys.getsizeof(%r)" % s, sys.getsizeof(s), hdr + (len(s) + 1) * kind)


class Sub(str):
    pass


legacy = Sub("abc")
st = u32(id(legacy) + O["unicode_state"])
eq("state.compact of a str subclass", (st >> cbit) & 1, 0)
eq("state.kind of a str subclass", (st >> shift) & 7, 1)
eq("state.ascii of a str subclass", (st >> abit) & 1, 1)

# ---- cleanup ------------------------------------------------------------------------------
stop.set()
for t in threads:
    t.join()
if sub_mod is not None:
    try:
        sub_mod.destroy(sub_id)
    except Exception as e:
        notes.append("destroy subinterpreter: %r" % (e,))

for n in notes:
    print("note:", n)
for f in failures:
    print("FAIL:", f)
print("checks: %d failures: %d" % (nchecks[0], len(failures)))
sys.exit(1 if failures else 0)
