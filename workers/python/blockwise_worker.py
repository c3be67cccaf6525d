"""blockwise's Python worker: runs the blocks of one Python task for a blockwise run.

blockwise starts it, or a user joins a run by hand with it (`--connect HOST:PORT --secret-file
PATH [--task ID]`, for a task with launch "manual": the run prints the command): it connects to
the scheduler at BLOCKWISE_CONNECT, proves it knows the run's secret (BLOCKWISE_SECRET, or the
file BLOCKWISE_SECRET_FILE names) for the worker slot it was launched for
(BLOCKWISE_WORKER_SLOT) or the task it joins, imports the task's module once, calls
its setup() once, then process(block, state) for every block it is sent, in the order sent.
The protocol is specified in blockwise's docs/design/WORKERS.md; this file is its Python end,
standard library only, for Python 3.8 and later. `blockwise worker --python-client` prints it.
"""

import hashlib
import hmac
import importlib.util
import inspect
import io
import json
import os
import posixpath
import random
import re
import secrets
import select
import shutil
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections import deque

PROTOCOL = 1
CLIENT = "blockwise-python 1 (python %d.%d.%d)" % sys.version_info[:3]
HEARTBEAT_SECONDS = 1.0
CONNECT_PATIENCE_SECONDS = 30.0
BUSY_PATIENCE_SECONDS = 120.0
MIN_WALLTIME_MARGIN = 60.0
FLUSH_AFTER_SECONDS = 0.005
FLUSH_AFTER_BLOCKS = 512
ANNOUNCE_AFTER_SECONDS = 0.01
POLL_SECONDS = 0.0005
FRAME_CAP = 16 * 1024 * 1024
STAGING_FOLDER = ".blockwise-staging"
METADATA_FILES = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}

HELLO, CHALLENGE, AUTH, ERROR = 0x01, 0x02, 0x03, 0x0F
INIT, READY, SETUP_FAILED = 0x10, 0x11, 0x12
BLOCKS, RESULTS, RETURNED, OUTPUT, CLOSING, HEARTBEAT, LEAVING = (
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26)
RECALL, STOP = 0x30, 0x31

HEADER = struct.Struct("<IB")
U32 = struct.Struct("<I")
RESULTS_HEAD = struct.Struct("<IBIId")
HEARTBEAT_FRAME = struct.Struct("<IBdd")


class Busy(Exception):
    """The scheduler refused the connection for being busy: connect again later."""


class SessionEnd(Exception):
    """The session is over: `code` is the exit status, the message says why."""

    def __init__(self, message, code=1):
        Exception.__init__(self, message)
        self.code = code


def log(message):
    stream = sys.__stderr__
    if stream is not None:
        stream.write("[blockwise python worker %d] %s\n" % (os.getpid(), message))
        stream.flush()


# ---- geometry: blockwise's Roi (python/blockwise/geometry.py), one type for every block -------

GEOMETRY_FILE = "blockwise_geometry.py"


def installed_geometry(source):
    """blockwise.geometry of an installed blockwise package whose geometry.py is `source`, or
    None: blocks then carry the very Roi class the package (and its daisy API) uses."""
    try:
        spec = importlib.util.find_spec("blockwise")
        folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    except (ImportError, ValueError):
        return None
    for folder in folders:
        try:
            with open(os.path.join(folder, "geometry.py"), "rb") as f:
                same = f.read() == source
        except OSError:
            continue
        if not same:
            return None
        try:
            return importlib.import_module("blockwise.geometry")
        except Exception:  # noqa: BLE001 - a broken installation: the file beside this one serves
            return None
    return None


def load_geometry():
    """blockwise's geometry module, never a copy of it: the package's own when this file is
    blockwise._worker_client; else blockwise_geometry.py beside this file (blockwise writes the
    two into one folder; it is importable as blockwise_geometry from then on), or the installed
    package's geometry.py when that is the same file; else the installed package's."""
    if __package__:
        from . import geometry
        return geometry
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), GEOMETRY_FILE)
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError:
        source = None
    if source is not None:
        module = installed_geometry(source)
        if module is None:
            spec = importlib.util.spec_from_file_location("blockwise_geometry", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules["blockwise_geometry"] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules["blockwise_geometry"]
                raise
        sys.modules["blockwise_geometry"] = module
        return module
    try:
        from blockwise import geometry
    except ImportError:
        raise ImportError(
            "blockwise's Python client needs %s beside it (%s), or blockwise's Python package "
            "installed: write both files with `blockwise worker --python-client-dir DIR` and run "
            "DIR's blockwise_worker.py" % (GEOMETRY_FILE, path)) from None
    sys.modules["blockwise_geometry"] = geometry
    return geometry


geometry = load_geometry()
Roi = geometry.Roi
Coordinate = geometry.Coordinate


class Block(object):
    """One block of a task, as process() gets it. `read_roi` and `write_roi` are
    blockwise.geometry.Roi values, made on first use (a block function that reads neither pays
    nothing for them)."""

    __slots__ = ("task_id", "id", "index", "attempt", "outputs", "params", "_layout",
                 "_position", "_rois")

    @property
    def read_roi(self):
        rois = self._rois
        if rois is None:
            rois = self._rois = self._layout.rois(self._position)
        return rois[0]

    @read_roi.setter
    def read_roi(self, roi):
        self._rois = (roi, self._roi(1))

    @property
    def write_roi(self):
        rois = self._rois
        if rois is None:
            rois = self._rois = self._layout.rois(self._position)
        return rois[1]

    @write_roi.setter
    def write_roi(self, roi):
        self._rois = (self._roi(0), roi)

    def _roi(self, which):
        """One of the two ROIs for a setter: None for a block no layout filled."""
        rois = getattr(self, "_rois", None)
        if rois is None:
            if getattr(self, "_layout", None) is None:
                return None
            rois = self._layout.rois(self._position)
        return rois[which]

    def __repr__(self):
        return "Block(task_id=%r, id=%r, index=%r, read_roi=%r, write_roi=%r, attempt=%r)" % (
            self.task_id, self.id, self.index, self.read_roi, self.write_roi, self.attempt)


# ---- blocks: the same blocks as blockwise's TaskLayout (lib/blocks/layout.ts) -----------------


def cantor_number(index):
    """daisy's block ID of a grid index (funlib's cantor_number), exact for every size."""
    result = 0
    total = 0
    for k, x in enumerate(index, 1):
        total += x
        if total == 0:
            continue
        v = 1
        for d in range(k):
            v = v * (total + d) // (d + 1)
        result += v
    return result


class Layout(object):
    """A task's tiling, from the layout in `init`: the block at each position."""

    def __init__(self, spec):
        total = spec["totalRoi"]
        read = spec["readRoi"]
        write = spec["writeRoi"]
        self.fit = spec["fit"]
        t_off, t_shape = [int(x) for x in total["offset"]], [int(x) for x in total["shape"]]
        r_off, r_shape = [int(x) for x in read["offset"]], [int(x) for x in read["shape"]]
        w_off, w_shape = [int(x) for x in write["offset"]], [int(x) for x in write["shape"]]
        dims = len(t_off)
        begin = [w_off[d] - r_off[d] for d in range(dims)]
        end = [r_off[d] + r_shape[d] - (w_off[d] + w_shape[d]) for d in range(dims)]
        tw_off = [t_off[d] + begin[d] for d in range(dims)]
        tw_shape = [t_shape[d] - begin[d] - end[d] for d in range(dims)]
        if self.fit == "valid":
            grid = [max(0, tw_shape[d] // w_shape[d]) for d in range(dims)]
        else:
            grid = [max(0, -(-tw_shape[d] // w_shape[d])) for d in range(dims)]
        strides = [1] * dims
        for d in range(dims - 2, -1, -1):
            strides[d] = strides[d + 1] * grid[d + 1]
        self.dims = dims
        self.grid = tuple(grid)
        self.strides = tuple(strides)
        self.shift = tuple(begin[d] // w_shape[d] for d in range(dims))
        self.write_shape = tuple(w_shape)
        self.read_shape = tuple(r_shape)
        self.tw_off = tuple(tw_off)
        self.tw_end = tuple(tw_off[d] + tw_shape[d] for d in range(dims))
        self.t_off = tuple(t_off)
        self.t_end = tuple(t_off[d] + t_shape[d] for d in range(dims))
        self.count = 1
        for g in grid:
            self.count *= g
        # One row per axis, so the per-block loops are a single zip.
        self.axes = tuple(zip(self.strides, self.shift, self.write_shape, self.read_shape,
                              self.tw_off, self.tw_end, self.t_off, self.t_end))
        self.index_axes = tuple(zip(self.strides, self.shift))
        self.offset_axes = tuple(zip(self.strides, self.write_shape, self.tw_off, self.t_off))
        self.read_extent = Coordinate._trusted(self.read_shape)
        self.write_extent = Coordinate._trusted(self.write_shape)

    def fill(self, block, position):
        """Set the block's id and index for `position` (an int); its ROIs follow on first use
        (`rois`)."""
        if self.dims == 1:
            i = position + self.shift[0]
            if i < 0:
                i = 0
            block.index = (i,)
            block.id = i  # the Cantor number of (i,)
        else:
            index = []
            rest = position
            for stride, shift in self.index_axes:
                g, rest = divmod(rest, stride)
                i = g + shift
                index.append(i if i > 0 else 0)
            block.index = tuple(index)
            block.id = cantor_number(index)
        block._layout = self
        block._position = position
        block._rois = None

    def rois(self, position):
        """(read ROI, write ROI) of the block at `position`, as geometry.Roi values."""
        w_off = []
        r_off = []
        rest = position
        for stride, ws, tw_off, t_off in self.offset_axes:
            g, rest = divmod(rest, stride)
            g *= ws
            w_off.append(tw_off + g)
            r_off.append(t_off + g)
        coordinate = Coordinate._trusted
        roi = Roi._of
        if self.fit != "shrink":
            # Every block has the same shapes: one Coordinate each, shared (they are immutable).
            return (roi(coordinate(r_off), self.read_extent),
                    roi(coordinate(w_off), self.write_extent))
        w_shape = []
        r_shape = []
        for d, (_, _, ws, rs, _, tw_end, t_off, t_end) in enumerate(self.axes):
            wb = w_off[d]
            rb = r_off[d]
            we = wb + ws
            re_ = rb + rs
            if we > tw_end:
                we = tw_end
            if rb < t_off:
                rb = r_off[d] = t_off
            if re_ > t_end:
                re_ = t_end
            w_shape.append(we - wb)
            r_shape.append(re_ - rb)
        return (roi(coordinate(r_off), coordinate(r_shape)),
                roi(coordinate(w_off), coordinate(w_shape)))


# ---- outputs: staging and hashing as blockwise's BlockOutputs (lib/outputs/block_outputs.ts) ----


def js_join(*parts):
    """node's path.join: the non-empty parts joined by "/", normalised."""
    joined = "/".join(p for p in parts if p != "")
    return posixpath.normpath(joined) if joined != "" else "."


def utf16_key(text):
    """JavaScript's default sort order (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_]+)\}")


def render_template(template, values):
    def replace(match):
        text = match.group(0)
        if text == "{{":
            return "{"
        if text == "}}":
            return "}"
        name = match.group(1)
        if name not in values:
            raise ValueError("Unknown placeholder %s in %s" % (text, template))
        return values[name]

    return PLACEHOLDER.sub(replace, template)


def placeholder_values(block):
    join = ",".join
    return {
        "task_id": block.task_id,
        "block_id": str(block.id),
        "index": join(str(x) for x in block.index),
        "read_offset": join(str(x) for x in block.read_roi.offset),
        "read_shape": join(str(x) for x in block.read_roi.shape),
        "write_offset": join(str(x) for x in block.write_roi.offset),
        "write_shape": join(str(x) for x in block.write_roi.shape),
    }


def remove_path(path):
    """node's rmSync(path, {recursive, force}): a file, a folder or nothing."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def walk(folder):
    """Files below `folder`, as sorted "/"-separated relative paths (symlinks count as files)."""
    out = []

    def visit(sub):
        here = folder if sub == "" else os.path.join(folder, sub)
        for entry in os.scandir(here):
            rel = entry.name if sub == "" else sub + "/" + entry.name
            if entry.is_dir(follow_symlinks=False):
                visit(rel)
            else:
                out.append(rel)

    visit("")
    out.sort(key=utf16_key)
    return out


def staging_lane(index):
    """As stagingLane (lib/outputs/staging.ts): one of 16 sub-folders, from the grid index."""
    h = 0
    for x in index:
        h = (h * 31 + x) & 0xFFFFFFFF
    return "0123456789abcdef"[((h * 0x9E3779B1) & 0xFFFFFFFF) >> 28]


def chunk_key(encoding, coords):
    parts = [str(c) for c in coords]
    if encoding["name"] == "default":
        return encoding["separator"].join(["c"] + parts)
    return "0" if not parts else encoding["separator"].join(parts)


def owned_chunk_keys(plan, write_roi):
    chunk = plan["storedChunk"]
    dims = len(chunk)
    first = []
    last = []
    for d in range(dims):
        begin = write_roi.offset[d] + plan["offset"][d]
        end = begin + write_roi.shape[d]
        first.append(begin // chunk[d])
        last.append(min(-(-end // chunk[d]), plan["chunkGrid"][d]) - 1)
    keys = []
    if any(f > l for f, l in zip(first, last)):
        return keys
    c = list(first)
    while True:
        keys.append(chunk_key(plan["keyEncoding"], c))
        d = dims - 1
        while d >= 0:
            c[d] += 1
            if c[d] <= last[d]:
                break
            c[d] = first[d]
            d -= 1
        if d < 0:
            return keys


def content_hash(files):
    """Order-independent hash over every file's output, path and SHA-256."""
    lines = sorted(("%s/%s\0%s\n" % (f["output"], f["path"], f["sha256"]) for f in files),
                   key=utf16_key)
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8"))
    return h.hexdigest()


class OutputProblem(Exception):
    """A block's outputs break the rules (missing, or outside its chunks): the attempt fails."""


class SetupProblem(Exception):
    """The task's module lacks a function it names: setup-failed, without a traceback."""


class Outputs(object):
    def __init__(self, plans, run_id):
        self.plans = plans
        self.run_id = run_id

    def block_root(self, plan, block):
        return js_join(plan["base"], STAGING_FOLDER, self.run_id, block.task_id,
                       "_".join(str(i) for i in block.index))

    def location(self, plan, block):
        """As stagedLocation (lib/outputs/staging.ts): a Zarr output's block folder, or a path
        output's file staged in a folder per output and lane, named after the block."""
        if plan["kind"] == "zarr":
            return self.block_root(plan, block)
        relative = render_template(plan["relative"], placeholder_values(block))
        folder = js_join(plan["base"], STAGING_FOLDER, self.run_id, block.task_id, plan["name"])
        key = "_".join(str(i) for i in block.index)
        return (folder + "/" + staging_lane(block.index) + "/" + key + "-"
                + relative[relative.rfind("/") + 1:])

    def prepare(self, block):
        where = {}
        for plan in self.plans:
            location = self.location(plan, block)
            remove_path(location)
            if plan["kind"] == "zarr":
                os.makedirs(location, exist_ok=True)
                for meta in plan["metadataFiles"]:
                    with open(os.path.join(location, meta["name"]), "w", encoding="utf-8") as f:
                        f.write(meta["text"])
            else:
                os.makedirs(os.path.dirname(location), exist_ok=True)
            where[plan["name"]] = location
        return where

    def collect(self, block, position):
        files = []
        for plan in self.plans:
            location = self.location(plan, block)
            if plan["kind"] == "path":
                relative = render_template(plan["relative"], placeholder_values(block))
                if not os.path.exists(location):
                    raise OutputProblem(
                        "Block %s did not write its output \"%s\" (%s): nothing at %s. Write it "
                        "to block.outputs[\"%s\"]." % (block.id, plan["name"], plan["written"],
                                                      location, plan["name"]))
                if os.path.isdir(location):
                    for sub in walk(location):
                        files.append(hash_file(plan["name"], relative + "/" + sub,
                                               os.path.join(location, sub)))
                else:
                    files.append(hash_file(plan["name"], relative, location))
                continue
            owned = owned_chunk_keys(plan, block.write_roi)
            owned_set = set(owned)
            for sub in walk(location):
                if "/" not in sub and sub in METADATA_FILES:
                    continue
                if sub not in owned_set:
                    mine = " ".join(owned) if len(owned) <= 4 else "%s ... (%d)" % (
                        " ".join(owned[:3]), len(owned))
                    raise OutputProblem(
                        "Block %s wrote chunk %s of output \"%s\" (%s), outside its write ROI "
                        "%s + %s; its chunks are %s. Write only the block's write ROI." % (
                            block.id, sub, plan["name"], plan["written"],
                            ",".join(str(x) for x in block.write_roi.offset),
                            ",".join(str(x) for x in block.write_roi.shape), mine))
                files.append(hash_file(plan["name"], sub, os.path.join(location, sub)))
        return {"position": position, "files": files, "content": content_hash(files)}

    def discard(self, block):
        for plan in self.plans:
            remove_path(self.location(plan, block))


def hash_file(output, relative, path):
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    return {"output": output, "path": relative, "size": size, "sha256": h.hexdigest()}


# ---- resource figures ------------------------------------------------------------------------


class Meter(object):
    """CPU, peak RSS and I/O of this process, read between blocks."""

    def __init__(self):
        try:
            import resource
            self.resource = resource
        except ImportError:
            self.resource = None
        # ru_maxrss is in KiB on Linux, in bytes on macOS.
        self.rss_unit = 1 if sys.platform == "darwin" else 1024
        try:
            self.io_fd = os.open("/proc/self/io", os.O_RDONLY)
        except OSError:
            self.io_fd = None
        self.own = 0

    def usage(self):
        """(peak RSS in bytes, minor page faults so far) of this process."""
        if self.resource is None:
            return float("nan"), float("nan")
        usage = self.resource.getrusage(self.resource.RUSAGE_SELF)
        return float(usage.ru_maxrss * self.rss_unit), float(usage.ru_minflt)

    def io(self):
        """(bytes read, bytes written) through syscalls, without the meter's own reads."""
        if self.io_fd is None:
            return 0.0, 0.0
        own = self.own
        data = os.pread(self.io_fd, 1024, 0)
        self.own += len(data)
        read = write = 0
        for line in data.split(b"\n"):
            if line.startswith(b"rchar:"):
                read = int(line[6:])
            elif line.startswith(b"wchar:"):
                write = int(line[6:])
        return float(read - own), float(write)


# ---- user output -----------------------------------------------------------------------------


class LineWriter(io.TextIOBase):
    """sys.stdout / sys.stderr: whole lines go to the scheduler as `output` messages."""

    def __init__(self, session, stream, fd):
        io.TextIOBase.__init__(self)
        self._session = session
        self._stream = stream
        self._fd = fd
        self._pending = ""
        self._lock = threading.Lock()

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        with self._lock:
            self._pending += text
            cut = self._pending.rfind("\n")
            if cut < 0:
                return len(text)
            lines = self._pending[:cut + 1]
            self._pending = self._pending[cut + 1:]
        self._session.send_json(OUTPUT, {"stream": self._stream, "text": lines})
        return len(text)

    def flush(self):
        pass

    def finish(self):
        with self._lock:
            rest = self._pending
            self._pending = ""
        if rest != "":
            self._session.send_json(OUTPUT, {"stream": self._stream, "text": rest + "\n"})


# ---- the session -----------------------------------------------------------------------------


def mac(secret, parts):
    h = hmac.new(bytes.fromhex(secret), digestmod=hashlib.sha256)
    for p in parts:
        h.update(("%d:%s;" % (len(p), p)).encode("utf-8"))
    return h.hexdigest()


def error_text(error):
    name = type(error).__name__
    text = str(error)
    return "%s: %s" % (name, text) if text != "" else name


# Files whose frames a failed block's stack leaves out (a program embedding this client adds its
# own calls into user code).
OWN_FILES = {__file__}


def error_fields(error):
    if isinstance(error, OutputProblem):
        return {"message": str(error)}
    message = error_text(error)
    # The chain `raise ... from cause` (or an error raised while handling another) names.
    seen = {id(error)}
    cause = error
    for _ in range(8):
        cause = cause.__cause__ if cause.__cause__ is not None else (
            None if cause.__suppress_context__ else cause.__context__)
        if cause is None or id(cause) in seen:
            break
        seen.add(id(cause))
        message += "; caused by " + error_text(cause)
    tb = error.__traceback__
    # This client's own frames (the calls into user code) are not the user's business.
    # Nor are importlib's, which import the user's module.
    while tb is not None and (tb.tb_frame.f_code.co_filename in OWN_FILES
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen importlib")):
        tb = tb.tb_next
    stack = "".join(traceback.format_exception(type(error), error, tb)).rstrip("\n")
    return {"message": message, "stack": stack}


class Results(object):
    """Finished blocks not reported yet; `take` makes the frame that reports them."""

    def __init__(self, stride, with_commits):
        self.stride = stride
        self.with_commits = with_commits
        self.records = []
        self.errors = []
        self.commits = []
        self.count = 0
        self.first = 0.0
        self.cpu = time.process_time()

    def take(self):
        """The results frame (b"" when nothing is pending), and start a new batch."""
        count = self.count
        if count == 0:
            return b""
        cpu = time.process_time()
        cpu_seconds = cpu - self.cpu
        self.cpu = cpu
        if self.with_commits:
            tail = json.dumps({"errors": self.errors, "commits": self.commits}).encode("utf-8")
        elif self.errors:
            tail = json.dumps(self.errors).encode("utf-8")
        else:
            tail = b""
        records = self.records
        values = len(records)
        frame = RESULTS_HEAD.pack(17 + 8 * values + len(tail), RESULTS, count, self.stride,
                                  cpu_seconds) + struct.pack("<%dd" % values, *records) + tail
        del records[:]
        del self.errors[:]
        del self.commits[:]
        self.count = 0
        return frame


class Session(object):
    """One connection to the scheduler: the worker protocol for one task.

    A program that runs blocks in its own process (blockwise's daisy API, in threads) subclasses
    it: `initialise` (`setup_task`, then `self.call`), `block_maker`, and the flags below."""

    # This process is a worker: sys.stdout and sys.stderr go to the scheduler.
    capture_output = True
    # A failed block ends the worker (`closing`) after its result is sent.
    end_on_failure = False
    end_on_failure_reason = "a block failed"

    def __init__(self, sock, slot, secret, walltime, join=None):
        self.sock = sock
        self.slot = slot
        # A worker joining by hand (--secret-file): the task it asks for ("" for the only one).
        self.join = join
        self.secret = secret
        self.walltime = walltime
        self.send_lock = threading.Lock()
        self.buffer = bytearray()
        self.start = 0
        self.queue = deque()
        self.recall = False
        self.final = False
        self.stopping = False
        self.running = None
        # Guards `running`, `results` and the announcement between the main thread and the
        # heartbeat thread.
        self.lock = threading.Lock()
        self.results = None
        self.announced = False
        self.announced_at = float("-inf")
        self.closed = False
        self.leaving = False
        self.blocks_done = 0
        self.seconds_done = 0.0
        # Set when serve() returns: the heartbeat thread ends.
        self.ended = threading.Event()
        try:
            self.poller = select.poll()
            self.poller.register(sock, select.POLLIN)
        except AttributeError:
            self.poller = None
        try:
            self.hangup = select.poll()
            self.hangup.register(sock, select.POLLRDHUP)
        except AttributeError:
            self.hangup = None

    # -- frames --

    def send(self, data):
        if not data:
            return
        with self.send_lock:
            if self.closed:
                return
            try:
                self.sock.sendall(data)
            except OSError as error:
                self.closed = True
                raise SessionEnd("the connection failed: %s" % error)

    def send_json(self, kind, value):
        body = json.dumps(value).encode("utf-8")
        self.send(HEADER.pack(len(body) + 1, kind) + body)

    def receive(self, wait):
        """Read what arrived (waiting for something when `wait`); returns False at EOF."""
        if not wait:
            if self.poller is not None:
                if not self.poller.poll(0):
                    return True
            elif not select.select([self.sock], [], [], 0)[0]:
                return True
        try:
            data = self.sock.recv(1 << 20)
        except OSError as error:
            raise SessionEnd("the connection failed: %s" % error)
        if not data:
            return False
        if self.start > 0 and self.start == len(self.buffer):
            self.buffer = bytearray(data)
            self.start = 0
        else:
            self.buffer += data
        return True

    def next_frame(self):
        """The next complete frame as (type, body), or None."""
        buf = self.buffer
        start = self.start
        if len(buf) - start < 5:
            return None
        length, kind = HEADER.unpack_from(buf, start)
        if length == 0 or length > FRAME_CAP:
            raise SessionEnd("the scheduler sent a frame of %d bytes" % length)
        if len(buf) - start < 4 + length:
            return None
        body = bytes(buf[start + 5:start + 4 + length])
        self.start = start + 4 + length
        if self.start > (1 << 20):
            del buf[:self.start]
            self.start = 0
        return kind, body

    def wait_frame(self):
        while True:
            frame = self.next_frame()
            if frame is not None:
                return frame
            if not self.receive(True):
                raise SessionEnd("the scheduler closed the connection")

    def refuse(self, why):
        try:
            self.send_json(ERROR, {"message": why})
        except SessionEnd:
            pass
        raise SessionEnd(why)

    # -- handshake and init --

    def handshake(self):
        nonce = secrets.token_hex(32)
        hello = {"protocol": PROTOCOL, "client": CLIENT, "pid": os.getpid(),
                 "host": socket.gethostname(), "nonce": nonce}
        if self.join is None:
            hello["slot"] = self.slot
        else:
            hello["join"] = self.join
        self.send_json(HELLO, hello)
        kind, body = self.wait_frame()
        if kind == ERROR:
            refusal = json.loads(body)
            if refusal.get("retry") is True:
                raise Busy(refusal["message"])
            if refusal.get("later") is True:
                raise SessionEnd("The run needs no more workers now: %s" % refusal["message"], 0)
            raise SessionEnd("The scheduler refused this worker: %s" % refusal["message"])
        if kind != CHALLENGE:
            self.refuse("the scheduler sent frame type 0x%02x before the handshake" % kind)
        challenge = json.loads(body)
        theirs = str(challenge.get("nonce", ""))
        proof = str(challenge.get("proof", ""))
        if not re.match(r"^[0-9a-f]{64}$", theirs) or not hmac.compare_digest(
                proof, mac(self.secret, ["blockwise scheduler", nonce, theirs])):
            self.refuse("the scheduler could not prove it knows this run's secret; is "
                        "BLOCKWISE_CONNECT (or --connect with --secret-file) pointing at the "
                        "right run?")
        claim = self.slot if self.join is None else "join:" + self.join
        self.send_json(AUTH, {"mac": mac(self.secret, ["blockwise worker", theirs, nonce,
                                                       claim])})

    def serve(self):
        self.handshake()
        kind, body = self.wait_frame()
        if kind == ERROR:
            refusal = json.loads(body)
            if refusal.get("later") is True:  # the run ended during the handshake
                raise SessionEnd("The run needs no more workers now: %s" % refusal["message"], 0)
            raise SessionEnd("The scheduler refused this worker: %s" % refusal["message"])
        if kind == STOP:
            raise SessionEnd("the scheduler stopped this worker before it started", 0)
        if kind != INIT:
            self.refuse("the scheduler sent frame type 0x%02x instead of init" % kind)
        init = json.loads(body)
        if init.get("protocol") != PROTOCOL:
            self.refuse("the scheduler speaks protocol %s but this worker speaks %d; run the "
                        "same blockwise version on both sides" % (init.get("protocol"), PROTOCOL))
        threading.Thread(target=self.heartbeats, name="blockwise-heartbeat", daemon=True).start()
        writers = ()
        if self.capture_output:
            writers = (LineWriter(self, "stdout", 1), LineWriter(self, "stderr", 2))
            sys.stdout, sys.stderr = writers
        try:
            if self.initialise(init):
                self.send_json(READY, {})
                self.run_blocks()
        finally:
            self.ended.set()
            if writers:
                sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            for writer in writers:
                try:
                    writer.finish()
                except SessionEnd:
                    pass

    def setup_failed(self, message, stack=None, stage=None):
        """`stage` "import": the module did not import (else its setup, or the settings)."""
        value = {"message": message}
        if stack is not None:
            value["stack"] = stack
        if stage is not None:
            value["stage"] = stage
        self.send_json(SETUP_FAILED, value)
        return False

    def setup_task(self, init):
        """What every worker takes from `init`: the task, its tiling, outputs and params."""
        self.task_id = init["taskId"]
        self.layout = Layout(init["layout"])
        self.measure = bool(init.get("measure"))
        plans = init.get("outputs") or []
        self.outputs = Outputs(plans, init.get("runId") or "run") if plans else None
        self.params = dict(init.get("params") or {})

    def initialise(self, init):
        """Load the task's module and setup(): sets `self.call`; False after setup-failed."""
        python = init.get("python")
        if not isinstance(python, dict):
            return self.setup_failed(
                "Task \"%s\" is not a Python task, but its worker is blockwise's Python client; "
                "this is a bug in blockwise's launcher" % init.get("taskId"))
        path = python["module"]
        host = socket.gethostname()
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as error:
            return self.setup_failed(
                "Cannot read the Python module %s on %s: %s; put it on a filesystem every "
                "worker node shares, at the same path" % (path, host, error.strerror or error))
        expected = python.get("moduleSha256")
        if expected is not None:
            sha = hashlib.sha256(source).hexdigest()
            if sha != expected:
                return self.setup_failed(
                    "The Python module %s on %s differs from the scheduler's (SHA-256 %s... "
                    "instead of %s...); make sure every node sees the same file (a shared "
                    "filesystem, not a copy)" % (path, host, sha[:12], expected[:12]))
        self.setup_task(init)
        try:
            try:
                module = import_module(path)
            except SystemExit:
                raise
            except BaseException as error:  # noqa: B902 - a module may raise anything
                fields = error_fields(error)
                return self.setup_failed(fields["message"], fields.get("stack"), "import")
            name = python.get("process") or "process"
            process = getattr(module, name, None)
            if not callable(process):
                raise SetupProblem(
                    "The Python module %s has no function %s (task \"%s\", python.process); "
                    "define def %s(block, state): ... in it" % (path, name, self.task_id, name))
            setup_name = python.get("setup")
            state = None
            if setup_name is not None:
                setup = getattr(module, setup_name, None)
                if not callable(setup):
                    raise SetupProblem(
                        "The Python module %s has no function %s (task \"%s\", python.setup); "
                        "define def %s(): ... in it, or remove setup" % (
                            path, setup_name, self.task_id, setup_name))
                state = setup()
        except SystemExit as error:
            return self.setup_failed("The Python module %s called sys.exit(%s) while loading"
                                     % (path, error.code))
        except SetupProblem as problem:
            return self.setup_failed(str(problem))
        except BaseException as error:  # noqa: B902 - user code may raise anything
            fields = error_fields(error)
            return self.setup_failed(fields["message"], fields.get("stack"))
        self.call = make_call(process, state)
        return True

    # -- blocks --

    def take_frames(self):
        """Act on every complete frame received so far."""
        while True:
            frame = self.next_frame()
            if frame is None:
                return
            kind, body = frame
            if kind == BLOCKS:
                n = U32.unpack_from(body)[0]
                if len(body) < 4 + 16 * n:
                    self.refuse("the scheduler sent a blocks frame too short for %d blocks" % n)
                values = struct.unpack_from("<%dd" % (2 * n), body, 4)
                self.queue.extend(zip(values[0::2], values[1::2]))
                if self.final:
                    self.recall = True
            elif kind == RECALL:
                self.recall = True
                if body[:1] == b"\x01":
                    self.final = True
            elif kind == STOP:
                self.stopping = True
            elif kind == ERROR:
                raise SessionEnd("The scheduler refused this worker: %s"
                                 % json.loads(body).get("message"))
            else:
                self.refuse("the scheduler sent frame type 0x%02x during the run" % kind)

    def hand_back(self):
        """Return the blocks not started, in the order they were sent."""
        self.flush()
        rest = [p for p, _ in self.queue]
        self.queue.clear()
        self.recall = False
        body = struct.pack("<I%dd" % len(rest), len(rest), *rest)
        self.send(HEADER.pack(len(body) + 1, RETURNED) + body)

    def flush(self):
        with self.lock:
            self.send(self.results.take())

    def block_maker(self):
        """The function (position, attempt) -> the block that `self.call` gets."""
        fill = self.layout.fill
        task_id = self.task_id
        params = self.params

        def make(position, attempt):
            block = Block()
            block.task_id = task_id
            block.attempt = int(attempt)
            block.params = params
            block.outputs = {}
            fill(block, position)
            return block

        return make

    def run_blocks(self):
        make = self.block_maker()
        call = self.call
        outputs = self.outputs
        end_on_failure = self.end_on_failure
        measure = self.measure
        meter = Meter() if measure else None
        results = self.results = Results(9 if measure else 3, outputs is not None)
        records = results.records
        lock = self.lock
        send = self.send
        perf_counter = time.perf_counter
        monotonic = time.monotonic
        wall = time.time
        cpu_clock = time.process_time
        cpu0 = cpu_clock()
        read0, write0 = meter.io() if measure else (0.0, 0.0)
        faults0 = meter.usage()[1] if measure else 0.0
        queue = self.queue
        popleft = queue.popleft
        polled_at = 0.0
        while True:
            if not queue:
                self.flush()
                if self.recall:
                    self.hand_back()
                    continue
                if self.stopping:
                    return
                if not self.receive(True):
                    raise SessionEnd("the scheduler closed the connection")
                self.take_frames()
                continue
            # Look for frames (a recall) between blocks, at most every POLL_SECONDS.
            if polled_at + POLL_SECONDS <= perf_counter():
                if not self.receive(False):
                    raise SessionEnd("the scheduler closed the connection")
                polled_at = perf_counter()
                if self.start < len(self.buffer):
                    self.take_frames()
            if self.recall:
                self.hand_back()
                continue
            position, attempt = popleft()
            p = int(position)
            block = make(p, attempt)
            now = monotonic()
            with lock:
                self.running = (position, now)
                # Name the block to the scheduler now and then (always when blocks are slow), so
                # that a crash is charged to it; only with nothing unreported before it.
                if results.count == 0 and now - self.announced_at >= ANNOUNCE_AFTER_SECONDS:
                    self.announced = True
                    self.announced_at = now
                    send(HEARTBEAT_FRAME.pack(17, HEARTBEAT, position, 0.0))
            t0 = perf_counter()
            error = None
            try:
                if outputs is not None:
                    block.outputs = outputs.prepare(block)
                call(block)
                if outputs is not None:
                    results.commits.append(outputs.collect(block, p))
            except SystemExit as exit_:
                with lock:
                    send(results.take() + HEARTBEAT_FRAME.pack(17, HEARTBEAT, position,
                                                               monotonic() - now))
                self.send_json(CLOSING, {"reason": "the worker called sys.exit(%s)" % (
                    "" if exit_.code is None else exit_.code)})
                raise SessionEnd("user code called sys.exit()", 1)
            except BaseException as e:  # noqa: B902 - a block's failure, whatever it raised
                error = e
                if outputs is not None:
                    try:
                        outputs.discard(block)
                    except OSError:
                        pass  # the next attempt's prepare, or the next run's sweep, removes it
            t1 = perf_counter()
            # The moment the block ended (the ledger's finished_at), before anything else runs.
            finished_at = wall() if measure else 0.0
            seconds = t1 - t0
            self.blocks_done += 1
            self.seconds_done += seconds
            fields = None
            if error is not None:
                fields = error_fields(error)
                fields["position"] = position
                del error
            with lock:
                self.running = None
                if measure:
                    cpu1 = cpu_clock()
                    read1, write1 = meter.io()
                    rss, faults1 = meter.usage()
                    records.extend((position, 0.0 if fields is None else 1.0, seconds,
                                    cpu1 - cpu0, rss, read1 - read0, write1 - write0, finished_at,
                                    faults1 - faults0))
                    cpu0, read0, write0, faults0 = cpu1, read1, write1, faults1
                else:
                    records.extend((position, 0.0 if fields is None else 1.0, seconds))
                if fields is not None:
                    results.errors.append(fields)
                count = results.count = results.count + 1
                if count == 1:
                    results.first = t1
                # An announced block is reported at once: the scheduler then no longer takes it
                # for the running one.
                if (self.announced or not queue or count >= FLUSH_AFTER_BLOCKS
                        or t1 - results.first >= FLUSH_AFTER_SECONDS):
                    self.announced = False
                    send(results.take())
            if fields is not None and end_on_failure:
                self.flush()
                self.send_json(CLOSING, {"reason": self.end_on_failure_reason})
                raise SessionEnd(self.end_on_failure_reason, 1)

    # -- the heartbeat thread --

    def heartbeats(self):
        while not self.ended.wait(HEARTBEAT_SECONDS):
            try:
                with self.lock:
                    running = self.running
                    if running is None:
                        self.send(HEARTBEAT_FRAME.pack(17, HEARTBEAT, -1.0, 0.0))
                    else:
                        # Report what finished first: the running block is then the oldest the
                        # scheduler holds, and its result follows as soon as it ends.
                        now = time.monotonic()
                        pending = b"" if self.announced else self.results.take()
                        self.announced = True
                        self.announced_at = now
                        self.send(pending + HEARTBEAT_FRAME.pack(17, HEARTBEAT, running[0],
                                                                 now - running[1]))
                self.check_walltime()
            except SessionEnd:
                pass
            if running is not None and self.peer_gone():
                self.peer_lost()
                return

    def peer_lost(self):
        """The scheduler hung up while a block ran."""
        # The main thread is inside user code and cannot notice: the scheduler dropped this
        # worker (a timeout, the run ended), so the block must not go on.
        log("The scheduler closed the connection while a block ran; exiting")
        os._exit(1)

    def peer_gone(self):
        if self.hangup is not None:
            return any(events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR)
                       for _, events in self.hangup.poll(0))
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def check_walltime(self):
        walltime = self.walltime
        if walltime is None or self.leaving:
            return
        ends_at, margin = walltime
        if margin is None:
            mean = self.seconds_done / self.blocks_done if self.blocks_done else 0.0
            margin = max(MIN_WALLTIME_MARGIN, 2 * mean)
        left = ends_at - time.time()
        if left >= margin:
            return
        self.leaving = True
        self.send_json(LEAVING, {"reason": "its job ends in %d s, less than the margin of %d s"
                                           % (max(0, round(left)), round(margin))})
        # The main thread hands the unstarted blocks back before it starts another one.
        self.final = True
        self.recall = True


def make_call(process, state):
    """process(block, state), or process(block) for a function of one parameter."""
    try:
        parameters = list(inspect.signature(process).parameters.values())
    except (TypeError, ValueError):
        return lambda block: process(block, state)
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    if len(positional) == 1 and not variadic:
        return process
    return lambda block: process(block, state)


def import_module(path):
    """Import the module at `path` once, its folder first on sys.path."""
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() and stem not in sys.modules else "blockwise_task_module"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("Cannot import %s as a Python module; give a .py file" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---- start-up --------------------------------------------------------------------------------


class Refusal(Exception):
    """A setting the worker cannot start with (exit status 2)."""


class NothingListens(Refusal):
    """The scheduler's address refused the connection, for a caller that knows the run was
    listening before it started (the daisy API's Client): the run has ended."""


def secret_from_file(path, via):
    try:
        mode = os.stat(path).st_mode
        if mode & 0o077:
            raise Refusal("The secret file %s (%s) can be read by other users (mode %o); make "
                          "it private with chmod 600 %s" % (path, via, mode & 0o777, path))
        with open(path, "r") as f:
            text = f.read()
    except OSError as error:
        raise Refusal("Cannot read the secret file %s (%s): %s; check the path (the run prints "
                      "it) and that this user may read it (chmod 600 %s)" % (
                          path, via, error.strerror or error, path))
    return check_secret(text.strip(), "the secret file %s" % path)


def parse_args(args):
    """--connect HOST:PORT, and to join a run by hand --secret-file PATH and --task ID."""
    options = {}
    names = {"--connect": "connect", "--secret-file": "secret_file", "--task": "task"}
    i = 0
    while i < len(args):
        name = args[i]
        if name not in names or i + 1 >= len(args):
            return None
        options[names[name]] = args[i + 1]
        i += 2
    return options


def secret_from_environment(env):
    direct = env.get("BLOCKWISE_SECRET", "")
    path = env.get("BLOCKWISE_SECRET_FILE", "")
    if direct != "":
        return check_secret(direct.strip(), "BLOCKWISE_SECRET")
    if path == "":
        raise Refusal("No secret to connect with: neither BLOCKWISE_SECRET nor "
                      "BLOCKWISE_SECRET_FILE is set; workers are started by a blockwise run, "
                      "which sets them")
    try:
        mode = os.stat(path).st_mode
        if mode & 0o077:
            raise Refusal("The secret file %s (BLOCKWISE_SECRET_FILE) can be read by other users "
                          "(mode %o); make it private with chmod 600 %s" % (path, mode & 0o777,
                                                                            path))
        with open(path, "r") as f:
            text = f.read()
    except OSError as error:
        raise Refusal("Cannot read the secret file %s (BLOCKWISE_SECRET_FILE): %s" % (
            path, error.strerror or error))
    return check_secret(text.strip(), "the secret file %s" % path)


def check_secret(text, where):
    if not re.match(r"^[0-9a-f]{64}$", text):
        raise Refusal("The secret in %s is not 64 hex digits (got %d characters); pass the "
                      "secret the scheduler generated for this run, unchanged" % (where,
                                                                                   len(text)))
    return text


def parse_address(text):
    match = re.match(r"^\[([^\]]+)\]:(\d+)$", text) or re.match(r"^([^:]+):(\d+)$", text)
    if match is None or not 0 < int(match.group(2)) < 65536:
        raise Refusal("Cannot connect to %r: give HOST:PORT (BLOCKWISE_CONNECT or --connect)"
                      % text)
    return match.group(1), int(match.group(2))


def job_end(env):
    for key in ("BLOCKWISE_JOB_END_TIME", "SLURM_JOB_END_TIME"):
        value = env.get(key, "").strip()
        if re.match(r"^\d+(\.\d+)?$", value):
            return float(value)
    return None


def walltime_margin(env):
    try:
        value = float(env.get("BLOCKWISE_WALLTIME_MARGIN", ""))
    except ValueError:
        return None
    return value if value > 0 and value != float("inf") else None


def parent_gone(env):
    """True when this worker was started by a local run (BLOCKWISE_PARENT_PID) that has died:
    the worker was re-parented, and nobody will ever listen for it."""
    parent = env.get("BLOCKWISE_PARENT_PID", "")
    return parent.isdigit() and os.getppid() != int(parent)


def connect(host, port, env, refused_ends=False):
    """A connection to the scheduler, retried for CONNECT_PATIENCE_SECONDS; `refused_ends`: a
    refused connection raises NothingListens at once instead of being retried."""
    deadline = time.monotonic() + CONNECT_PATIENCE_SECONDS
    wait = 0.2
    # A local worker checks for its run often enough to exit within a second of its death.
    longest = 0.5 if env.get("BLOCKWISE_PARENT_PID", "").isdigit() else 2.0
    while True:
        if parent_gone(env):
            raise Refusal("The run that started this worker (pid %s) has ended before the "
                          "worker could connect; exiting" % env["BLOCKWISE_PARENT_PID"])
        try:
            sock = socket.create_connection((host, port), timeout=10)
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as error:
            if refused_ends and isinstance(error, ConnectionRefusedError):
                raise NothingListens("Nothing listens at %s:%d: the run has ended" % (host, port))
            if time.monotonic() + wait > deadline:
                raise Refusal("Cannot connect to the scheduler at %s:%d: %s (tried for %d s); "
                              "check that the run is still going and that this node can reach "
                              "it" % (host, port, error, CONNECT_PATIENCE_SECONDS))
            log("Cannot reach the scheduler yet (%s); retrying" % error)
            time.sleep(wait)
            wait = min(2 * wait, longest)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS")


def size_thread_pools(env):
    """The worker profile's thread pools for a remote worker whose scheduler had no figure to go
    by: each variable not set gets the cores this process may run on (its job's share), before
    the task's module imports numpy or anything else that reads them."""
    if env.get("BLOCKWISE_THREADS_FROM_AFFINITY") != "1":
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    for name in THREAD_VARIABLES:
        if name not in env:
            env[name] = str(max(1, cores))


def serve_connected(host, port, env, make_session, refused_ends=False):
    """Connect to the scheduler and serve the session `make_session(sock)` makes, connecting
    again while the scheduler says it is busy; returns the session once it is over."""
    # A scheduler busy with other connections' handshakes says so: come back, not a crash.
    busy_until = time.monotonic() + BUSY_PATIENCE_SECONDS
    wait = 0.25
    while True:
        sock = connect(host, port, env, refused_ends)
        session = make_session(sock)
        try:
            session.serve()
            return session
        except Busy as busy:
            sock.close()
            if time.monotonic() + wait > busy_until:
                raise SessionEnd("The scheduler stayed busy for %d s: %s"
                                 % (BUSY_PATIENCE_SECONDS, busy))
            pause = wait / 2 + random.random() * wait / 2
            log("The scheduler is busy (%s); connecting again in %d ms" % (busy, pause * 1000))
            time.sleep(pause)
            wait = min(2 * wait, 5.0)


def main(argv):
    env = os.environ
    size_thread_pools(env)
    options = parse_args(list(argv))
    if options is None:
        log("usage: blockwise_worker.py [--connect HOST:PORT] [--secret-file PATH [--task ID]]; "
            "blockwise starts this worker, or it joins a run by hand with --secret-file")
        return 2
    target = options.get("connect", env.get("BLOCKWISE_CONNECT", ""))
    joining = "secret_file" in options or "task" in options
    join = options.get("task", "") if joining else None
    # Ctrl-C in the terminal reaches every process of the group: the scheduler decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if target == "":
            raise Refusal("No scheduler to connect to: BLOCKWISE_CONNECT is not set; workers are "
                          "started by a blockwise run, which sets it")
        slot = env.get("BLOCKWISE_WORKER_SLOT", "")
        if not joining and not re.match(r"^[0-9a-f]{8,64}$", slot):
            raise Refusal("No worker slot: BLOCKWISE_WORKER_SLOT is %s; workers are started by "
                          "a blockwise run, which sets it; to join a run by hand, pass "
                          "--secret-file PATH" % (repr(slot) if slot else "not set"))
        if "secret_file" in options:
            secret = secret_from_file(options["secret_file"], "--secret-file")
        else:
            secret = secret_from_environment(env)
        host, port = parse_address(target)
        end = job_end(env)
        walltime = None if end is None else (end, walltime_margin(env))
        serve_connected(host, port, env, lambda sock: Session(sock, slot, secret, walltime, join))
    except Refusal as refusal:
        log(str(refusal))
        return 2
    except SessionEnd as end_:
        log(str(end_) if end_.code == 0 and joining else "The session ended: %s" % end_)
        return end_.code
    log("The scheduler stopped this worker; exiting")
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    # Threads (the heartbeat, any the user's code started) must not keep the worker alive.
    os._exit(code)
