"""zarr-python's side of bench/codecs.ts (Debian's zarr 2.13 and numcodecs 0.11, one thread).

    python3 zarr_python.py build DIR SIZE CODECS_JSON
        The smooth float32 field (SIZE^3, C order, little endian) into DIR/source.f32, then one
        Zarr v2 array per codec, DIR/<name>.zarr, with 64^3 chunks, written by zarr-python.
    python3 zarr_python.py measure ARRAY RAW OUT
        Reads ARRAY whole once (page cache warm, untimed), then times one whole read (z[:]), and
        one whole write of RAW's values into a new array OUT with ARRAY's codec (out[:] = data,
        the array created before the clock starts). Prints {"read_s", "write_s"}.
    python3 zarr_python.py chunk ARRAY CONFIG_JSON KEY
        One chunk's decode and encode through the numcodecs codec, timeit, median of 5 repeats.
        Prints {"decode_ms", "encode_ms"}.
    python3 zarr_python.py copy RAW SIZE
        numpy's copy of every 64^3 block out of RAW's field in memory into one reused block
        (what `out[:] = data` does per chunk before encoding), median of 5 passes. Prints
        {"copy_ms"} per block.
    python3 zarr_python.py verify RAW ARRAY...
        Each ARRAY read by zarr-python against RAW's values. Prints [{"array", "equal",
        "chunks", "expected_chunks"}].

CODECS_JSON is [{"name": ..., "config": <numcodecs config or null>}, ...]. Blosc runs on one
thread (numcodecs.blosc.use_threads = False, set_nthreads(1)): the figures are single-threaded.
"""

import json
import os
import shutil
import statistics
import sys
import time
import timeit

import numcodecs
import numcodecs.blosc
import numpy as np
import zarr

numcodecs.blosc.use_threads = False
numcodecs.blosc.set_nthreads(1)

CHUNK = 64
SLAB = 64


def field_slab(z0, depth, size):
    """Planes z0 .. z0 + depth of the smooth field: low-frequency sines, float32."""
    i = np.arange(size, dtype=np.float32)
    z = np.arange(z0, z0 + depth, dtype=np.float32)[:, None, None]
    y = i[None, :, None]
    x = i[None, None, :]
    two_pi = np.float32(2 * np.pi)
    f = np.sin(x * (two_pi / 97)) * np.cos(y * (two_pi / 131))
    f = f + np.float32(0.5) * np.sin(z * (two_pi / 173) + x * (two_pi / 211))
    f = f + np.float32(0.25) * np.cos((y + z) * (two_pi / 59))
    return f.astype("<f4")


def codec_of(config):
    return None if config is None else numcodecs.get_codec(dict(config))


def build(folder, size, codecs):
    os.makedirs(folder, exist_ok=True)
    raw = os.path.join(folder, "source.f32")
    with open(raw + ".part", "wb") as out:
        for z0 in range(0, size, SLAB):
            field_slab(z0, min(SLAB, size - z0), size).tofile(out)
    os.replace(raw + ".part", raw)
    data = np.memmap(raw, dtype="<f4", mode="r", shape=(size, size, size))
    written = []
    for codec in codecs:
        final = os.path.join(folder, codec["name"] + ".zarr")
        part = final + ".part"
        shutil.rmtree(part, ignore_errors=True)
        started = time.perf_counter()
        z = zarr.open(part, mode="w", shape=(size,) * 3, chunks=(CHUNK,) * 3, dtype="<f4",
                      compressor=codec_of(codec["config"]), fill_value=0.0)
        z[:] = data
        shutil.rmtree(final, ignore_errors=True)
        os.replace(part, final)
        written.append({"name": codec["name"], "seconds": time.perf_counter() - started})
    print(json.dumps(written))


def measure(array, raw, out):
    z = zarr.open(array, mode="r")
    z[:]  # page cache and allocator warm; not timed
    started = time.perf_counter()
    values = z[:]
    read_s = time.perf_counter() - started
    del values
    data = np.fromfile(raw, dtype="<f4").reshape(z.shape)
    w = zarr.open(out, mode="w", shape=z.shape, chunks=z.chunks, dtype=z.dtype,
                  compressor=z.compressor, fill_value=z.fill_value)
    started = time.perf_counter()
    w[:] = data
    write_s = time.perf_counter() - started
    print(json.dumps({"read_s": read_s, "write_s": write_s}))


def per_call_ms(fn):
    """timeit: enough calls for 50 ms a repeat, 5 repeats, the median per call."""
    fn()
    number = 1
    while timeit.timeit(fn, number=number) < 0.05:
        number *= 2
    return statistics.median(timeit.repeat(fn, number=number, repeat=5)) / number * 1000


def chunk(array, config, key):
    z = zarr.open(array, mode="r")
    codec = codec_of(config)
    with open(os.path.join(array, key), "rb") as f:
        encoded = f.read()
    decoded = np.frombuffer(codec.decode(encoded), dtype=z.dtype).reshape(z.chunks)
    print(json.dumps({
        "decode_ms": per_call_ms(lambda: codec.decode(encoded)),
        "encode_ms": per_call_ms(lambda: codec.encode(decoded)),
    }))


def copy(raw, size):
    data = np.fromfile(raw, dtype="<f4").reshape(size, size, size)
    out = np.empty((CHUNK, CHUNK, CHUNK), dtype="<f4")
    passes = []
    for _ in range(6):
        started = time.perf_counter()
        for z in range(0, size, CHUNK):
            for y in range(0, size, CHUNK):
                for x in range(0, size, CHUNK):
                    out[...] = data[z:z + CHUNK, y:y + CHUNK, x:x + CHUNK]
        passes.append((time.perf_counter() - started) / (size // CHUNK) ** 3 * 1000)
    print(json.dumps({"copy_ms": statistics.median(passes[1:])}))


def verify(raw, arrays):
    results = []
    for array in arrays:
        z = zarr.open(array, mode="r")
        data = np.memmap(raw, dtype="<f4", mode="r", shape=z.shape)
        equal = True
        for z0 in range(0, z.shape[0], SLAB):
            if not np.array_equal(z[z0:z0 + SLAB], data[z0:z0 + SLAB]):
                equal = False
                break
        results.append({"array": array, "equal": equal, "chunks": z.nchunks_initialized,
                        "expected_chunks": z.nchunks})
    print(json.dumps(results))


def main(argv):
    command = argv[1]
    if command == "build":
        build(argv[2], int(argv[3]), json.loads(argv[4]))
    elif command == "measure":
        measure(argv[2], argv[3], argv[4])
    elif command == "chunk":
        chunk(argv[2], json.loads(argv[3]), argv[4])
    elif command == "copy":
        copy(argv[2], int(argv[3]))
    elif command == "verify":
        verify(argv[2], argv[3:])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv)
