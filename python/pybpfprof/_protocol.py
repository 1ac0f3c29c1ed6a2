"""The agent's wire protocol, version 1 (docs/agent-protocol.md), for clients.

The reference implementation is userspace/agent/protocol.{h,cpp}; this mirrors what its
client side does: ``frame``/``encode_request`` for requests, ``read_message`` for the
agent's messages, with the same limits (a header of 1 byte to 1 MiB, nested at most 32
deep, at most 16 attachments of at most 1 GiB each) and a deadline for a whole message.
"""

import errno
import json
import math
import os
import re
import select
import socket
import struct
import time

from ._errors import AgentProtocolError, ProfilingError

PROTOCOL_VERSION = 1
DEFAULT_SOCKET = "/run/pybpfprof/agent.sock"
SOCKET_ENV = "PYBPFPROF_AGENT_SOCKET"

MAX_REQUEST_BYTES = 64 * 1024
MAX_HEADER_BYTES = 1 << 20
MAX_HEADER_DEPTH = 32
MAX_ATTACHMENTS = 16
MAX_ATTACHMENT_BYTES = 1 << 30
MAX_PIDS = 64
MAX_PID = 4194304
MIN_RATE_HZ = 1
MAX_RATE_HZ = 10000
MAX_DURATION_S = 31 * 24 * 3600
# The shortest duration, as the CLI's -d (kMinDurationS in userspace/cli/options.h).
MIN_DURATION_S = 0.1
MODES = ("cpu", "wall", "gil")
MIN_BLOCK_S = 10e-6  # 'min_block_us' from 10 ...
MAX_BLOCK_S = 1.0    # ... to 1000000

# How much one recv() asks for.
_CHUNK = 1 << 20


def socket_path():
    """The agent's socket: $PYBPFPROF_AGENT_SOCKET, else /run/pybpfprof/agent.sock."""
    env = os.environ.get(SOCKET_ENV, "")
    return env if env else DEFAULT_SOCKET


def connect(path, timeout=60.0):
    """A connected stream socket to the agent at path (close-on-exec, as Python makes
    every socket). Raises OSError (FileNotFoundError, ConnectionRefusedError,
    PermissionError, ...) when nothing accepts there. ``timeout`` bounds each send."""
    if len(os.fsencode(path)) >= 108:
        raise OSError(errno.ENAMETOOLONG, "the agent socket path %s is too long" % path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def frame(payload):
    """4-byte big-endian length + payload (bytes)."""
    return struct.pack(">I", len(payload)) + payload


def encode_request(request):
    """The frame of a request (a dict): ``v`` is added; the JSON is compact and ASCII.
    Raises ValueError when it is over the agent's 64 KiB."""
    body = dict(request)
    body.setdefault("v", PROTOCOL_VERSION)
    payload = json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")
    if not 1 <= len(payload) <= MAX_REQUEST_BYTES:
        raise ValueError("a request must have at most %d bytes (this one has %d)" % (MAX_REQUEST_BYTES, len(payload)))
    return frame(payload)


def send_request(sock, request):
    """Sends one request. Raises ProfilingError (code "connection") when the agent is gone."""
    data = encode_request(request)
    try:
        sock.sendall(data)
    except OSError as e:
        raise ProfilingError("cannot talk to the agent (%s)" % _oserror_text(e), "connection") from e


def _oserror_text(e):
    if isinstance(e, socket.timeout):
        return "timed out"
    return e.strerror or str(e)


class _Deadline(object):
    def __init__(self, timeout):
        self.end = None if timeout is None or timeout < 0 else time.monotonic() + timeout

    def remaining(self):
        if self.end is None:
            return None
        return max(0.0, self.end - time.monotonic())


def wait_readable(sock, timeout):
    """True when sock has bytes (or EOF) within timeout seconds (None: no limit)."""
    return _wait_readable(sock, _Deadline(timeout))


def _wait_readable(sock, deadline):
    """True when sock has bytes (or EOF) before the deadline."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    while True:
        left = deadline.remaining()
        ms = -1 if left is None else int(math.ceil(left * 1000))
        try:
            events = poller.poll(ms)
        except InterruptedError:  # pragma: no cover (PEP 475 retries already)
            continue
        if events:
            return True
        if left is not None and deadline.remaining() <= 0:
            return False


def _read_exact(sock, n, deadline, what):
    """n bytes, or raises: EOF is ProfilingError(code "connection") naming what was cut."""
    chunks = []
    got = 0
    while got < n:
        if not _wait_readable(sock, deadline):
            raise ProfilingError("the agent did not answer in time (timed out)", "connection")
        try:
            chunk = sock.recv(min(n - got, _CHUNK))
        except (BlockingIOError, InterruptedError):
            continue
        except OSError as e:
            raise ProfilingError("reading from the agent: %s" % _oserror_text(e), "connection") from e
        if not chunk:
            if what == "length" and got == 0:
                raise ProfilingError("the agent closed the connection", "connection")
            if what == "attachment":
                raise ProfilingError("the agent closed the connection in the middle of an attachment "
                                     "(%d of %d bytes)" % (got, n), "connection")
            raise ProfilingError("the agent closed the connection in the middle of a message", "connection")
        chunks.append(chunk)
        got += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _reject_constant(name):
    raise ValueError("%s is not JSON" % name)


def _parse_float(text):
    v = float(text)
    if math.isinf(v):
        raise ValueError("number overflow parsing '%s'" % text[:40])
    return v


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate field '%s'" % k[:40])
        out[k] = v
    return out


def _check_tree(value, max_depth):
    """Depth (a scalar 0, [] 1) at most max_depth; every string valid Unicode (no unpaired
    surrogate from a \\ud800 escape). Iterative."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            depth += 1
            if depth > max_depth:
                raise ValueError("JSON nested deeper than %d levels" % max_depth)
            items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
            for k, x in items:
                if k is not None:
                    k.encode("utf-8")
                stack.append((x, depth))
        elif isinstance(v, str):
            v.encode("utf-8")


def parse_json_strict(data, max_depth=MAX_HEADER_DEPTH):
    """One JSON value from bytes, as strictly as the agent's parser: UTF-8 without a byte
    order mark or NUL byte, no NaN/Infinity, no number beyond a double, no duplicate key,
    no unpaired surrogate, nested at most max_depth deep. Raises ValueError (one line)."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise ValueError("invalid JSON at byte 0: byte order mark")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ValueError("invalid JSON at byte %d: NUL byte" % nul)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("invalid JSON at byte %d: ill-formed UTF-8 byte" % e.start) from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                           parse_float=_parse_float)
    except RecursionError:
        raise ValueError("JSON nested deeper than %d levels" % max_depth) from None
    except ValueError as e:
        raise ValueError("invalid JSON: %s" % str(e).splitlines()[0][:200]) from None
    try:
        _check_tree(value, max_depth)
    except UnicodeEncodeError:
        raise ValueError("invalid JSON: an unpaired surrogate escape") from None
    return value


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def read_message(sock, timeout=None):
    """One whole message of the agent: (header dict, [attachment bytes, ...]).

    ``timeout`` (seconds, None: none) bounds the whole message, as read_message in
    protocol.cpp. Raises ProfilingError(code "connection") on EOF, a timeout or a read
    error, and AgentProtocolError when the agent breaks the protocol: a header of 0 or
    more than 1 MiB, one that is not a strict JSON object nested at most 32 deep, or an
    "attachments" field that is not an array of at most 16 sizes of at most 1 GiB."""
    deadline = _Deadline(timeout)
    (length,) = struct.unpack(">I", _read_exact(sock, 4, deadline, "length"))
    if length == 0 or length > MAX_HEADER_BYTES:
        raise AgentProtocolError("message header of %d bytes: a header must have 1 to %d bytes"
                                 % (length, MAX_HEADER_BYTES))
    raw = _read_exact(sock, length, deadline, "header")
    try:
        header = parse_json_strict(raw, MAX_HEADER_DEPTH)
    except ValueError as e:
        raise AgentProtocolError("message header: %s" % e) from None
    if not isinstance(header, dict):
        raise AgentProtocolError("message header is not a JSON object (got %s)" % type(header).__name__)
    sizes = header.get("attachments", [])
    if "attachments" in header:
        ok = isinstance(sizes, list) and len(sizes) <= MAX_ATTACHMENTS and all(
            _is_int(n) and 0 <= n <= MAX_ATTACHMENT_BYTES for n in sizes)
        if not ok:
            raise AgentProtocolError("message header field 'attachments' must be an array of at most %d sizes "
                                     "from 0 to %d (got %s)" % (MAX_ATTACHMENTS, MAX_ATTACHMENT_BYTES,
                                                                json.dumps(sizes)[:40]))
    attachments = [_read_exact(sock, n, deadline, "attachment") if n else b"" for n in sizes]
    return header, attachments


MAX_OUTPUT_NAME_BYTES = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean_output_name(name):
    """A file name as the agent accepts it in 'output_name' (it refuses control characters
    and more than 4096 bytes, and a refused stop would cost the profile): control
    characters become '?', the rest is cut to 4096 bytes of UTF-8 at a character."""
    if not name:
        return ""
    text = _CONTROL.sub("?", os.fsdecode(name) if isinstance(name, bytes) else str(name))
    data = text.encode("utf-8", "replace")[:MAX_OUTPUT_NAME_BYTES]
    return data.decode("utf-8", "ignore")


def check_pids(pids):
    """pids as the agent takes them: a list of 1 to 64 distinct ints from 1 to 4194304.
    Raises TypeError/ValueError naming what is wrong."""
    if _is_int(pids):
        pids = [pids]
    try:
        pids = list(pids)
    except TypeError:
        raise TypeError("pids must be a process ID or a list of them (got %r)" % (pids,)) from None
    if not 1 <= len(pids) <= MAX_PIDS:
        raise ValueError("pids must list 1 to %d process IDs (got %d)" % (MAX_PIDS, len(pids)))
    for p in pids:
        if not _is_int(p):
            raise TypeError("pids must be integers (got %r)" % (p,))
        if not 1 <= p <= MAX_PID:
            raise ValueError("a process ID is from 1 to %d (got %d)" % (MAX_PID, p))
    if len(set(pids)) != len(pids):
        raise ValueError("pids lists a process twice: %r" % (pids,))
    return pids


def check_number(name, value, low, high, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number (got %r)" % (name, value))
    if not (low <= value <= high):  # also refuses NaN
        raise ValueError("%s must be %s from %g to %g (got %r)" % (name, what, low, high, value))
    return value


def check_mode(mode, min_block):
    """mode and min_block as the agent takes them ('mode', 'min_block_us'): mode one of
    "cpu", "wall", "gil" (any case); min_block None, or seconds from 10e-6 to 1 and only
    with mode "wall". Returns (mode, min_block_us or None). Raises TypeError/ValueError
    naming what is wrong and the fix."""
    if not isinstance(mode, str) or mode.lower() not in MODES:
        raise ValueError("mode must be 'cpu' (on-CPU time), 'wall' (on- and off-CPU time) or 'gil' (on-CPU time "
                         "holding the GIL) (got %r)" % (mode,))
    mode = mode.lower()
    if min_block is None:
        return mode, None
    check_number("min_block", min_block, MIN_BLOCK_S, MAX_BLOCK_S, "a number of seconds")
    if mode != "wall":
        raise ValueError("min_block only applies to mode='wall' (it bounds the off-CPU intervals kept one by one); "
                         "pass mode='wall', or leave min_block out")
    # Whole microseconds, as the agent's protocol carries it (and the CLI rounds it).
    return mode, max(10, min(1000000, int(round(min_block * 1e6))))
