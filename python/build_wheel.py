#!/usr/bin/env python3
"""Write blockwise's Python wheel: the `blockwise` package (python/blockwise/) plus a binary.

    python3 python/build_wheel.py --binary PATH [--target T] [--out DIR]

writes DIR/blockwise-<version>-py3-none-<platform tag>.whl (DIR: dist/ of the repository) and
prints its path. The binary goes in the wheel's scripts (`blockwise-<version>.data/scripts/
blockwise`, executable), so pip installs it as `blockwise` in the environment's bin/, next to its
python, as ruff and uv ship theirs; the package finds it there first. The version is
package.json's; the platform tag is the target's (T as compile.sh names it; default: this
machine's, as compile.sh's plain build). The wheel holds the package's .py and py.typed files
and nothing else, and is the same bytes for the same inputs (fixed timestamps, sorted entries).

Standard library only, Python 3.8 or later.
"""

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import platform
import re
import stat
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "blockwise"

# compile.sh's targets and the platform tags of their wheels. Every glibc runtime needs at most
# GLIBC_2.17 (`objdump -T`), so manylinux_2_17 (alias manylinux2014), as ruff's and uv's wheels.
PLATFORM_TAGS = {
    "linux-x64": ["manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "linux-x64-baseline": ["manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "linux-arm64": ["manylinux_2_17_aarch64", "manylinux2014_aarch64"],
    "linux-x64-musl": ["musllinux_1_2_x86_64"],
}

SUMMARY = (
    "Resumable blockwise task scheduler for huge n-dimensional volumes, with daisy's Python API"
)

DESCRIPTION = """\
# blockwise

blockwise runs pipelines of tasks over huge n-dimensional volumes block by block, keeps a
ledger of what is done so that a killed run resumes where it stopped, and reports on it.

This wheel holds the `blockwise` command (a self-contained executable, installed on the
environment's PATH) and the `blockwise` Python package. `blockwise.daisy` is daisy's Python
API on blockwise's engine: a daisy script switches with one line,

```python
import blockwise.daisy as daisy
```

It installs offline:

```sh
python3 -m venv --system-site-packages v && v/bin/pip install --no-index blockwise-*.whl
```
"""

# Zip timestamps: the earliest a zip can hold, so that a rebuild gives the same bytes.
EPOCH = (1980, 1, 1, 0, 0, 0)


class BuildError(Exception):
    pass


def host_target():
    """This machine's target, as compile.sh's plain build chooses it."""
    machine = platform.machine().lower()
    return "linux-arm64" if machine in ("aarch64", "arm64") else "linux-x64"


def read_version():
    path = os.path.join(REPO, "package.json")
    try:
        with open(path, encoding="utf-8") as f:
            version = json.load(f)["version"]
    except (OSError, ValueError, KeyError) as e:
        raise BuildError("cannot read the version from %s: %s" % (path, e)) from e
    # A release version as PEP 440 and the wheel's file name both accept it.
    if not isinstance(version, str) or not re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?", version):
        raise BuildError(
            "package.json's version %r is not a PEP 440 release (like 1.2.3 or 1.2.3rc1): "
            "set one that a wheel can carry" % (version,)
        )
    return version


def package_files(package):
    """(path in the wheel, file on disk) for the package's .py and py.typed files, sorted."""
    if not os.path.isfile(os.path.join(package, "__init__.py")):
        raise BuildError("%s is not a Python package (no __init__.py there)" % package)
    found = []
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in files:
            if name.endswith(".py") or name == "py.typed":
                full = os.path.join(root, name)
                inside = os.path.relpath(full, os.path.dirname(package)).replace(os.sep, "/")
                found.append((inside, full))
    return sorted(found)


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def zip_info(name, executable):
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.create_system = 3  # Unix: external_attr carries the mode, which pip restores
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def metadata(version):
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\n"
        "Version: %s\n"
        "Summary: %s\n"
        "License: MIT\n"
        "Requires-Python: >=3.8\n"
        "Classifier: License :: OSI Approved :: MIT License\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Description-Content-Type: text/markdown\n"
        "\n"
        "%s" % (NAME, version, SUMMARY, DESCRIPTION)
    )


def wheel_file(tags):
    lines = [
        "Wheel-Version: 1.0",
        "Generator: blockwise build_wheel.py",
        "Root-Is-Purelib: false",
    ]
    lines += ["Tag: py3-none-%s" % tag for tag in tags]
    return "\n".join(lines) + "\n"


def build(binary, target, out, package):
    if target not in PLATFORM_TAGS:
        raise BuildError(
            "unknown target %r: use one of %s" % (target, ", ".join(PLATFORM_TAGS))
        )
    if not os.path.isfile(binary):
        raise BuildError("the binary %s does not exist (build it with ./compile.sh)" % binary)
    if not os.access(binary, os.X_OK):
        raise BuildError("the binary %s is not executable (chmod +x it)" % binary)
    version = read_version()
    tags = PLATFORM_TAGS[target]
    files = package_files(package)
    wheel_name = "%s-%s-py3-none-%s.whl" % (NAME, version, ".".join(tags))
    dist_info = "%s-%s.dist-info" % (NAME, version)
    script = "%s-%s.data/scripts/%s" % (NAME, version, NAME)

    os.makedirs(out, exist_ok=True)
    final = os.path.join(out, wheel_name)
    fd, partial = tempfile.mkstemp(prefix=".%s." % wheel_name, dir=out)
    os.close(fd)
    try:
        records = []
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as wheel:

            def add(name, data, executable=False):
                wheel.writestr(zip_info(name, executable), data)
                records.append((name, record_hash(data), str(len(data))))

            for inside, full in files:
                with open(full, "rb") as f:
                    add(inside, f.read())
            # The binary (about 100 MB) is streamed, hashed on the way.
            digest, size = hashlib.sha256(), 0
            with open(binary, "rb") as src, wheel.open(zip_info(script, True), "w") as dst:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    digest.update(chunk)
                    dst.write(chunk)
                    size += len(chunk)
            encoded = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
            records.append((script, "sha256=" + encoded, str(size)))
            add(dist_info + "/METADATA", metadata(version).encode("utf-8"))
            add(dist_info + "/WHEEL", wheel_file(tags).encode("utf-8"))
            record = io.StringIO()
            writer = csv.writer(record, lineterminator="\n")
            writer.writerows(records)
            writer.writerow((dist_info + "/RECORD", "", ""))
            data = record.getvalue().encode("utf-8")
            wheel.writestr(zip_info(dist_info + "/RECORD", False), data)
        os.chmod(partial, 0o644)
        os.replace(partial, final)  # a killed build never leaves half a wheel under its name
    except BaseException:
        os.unlink(partial)
        raise
    return final


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="build_wheel.py",
        description="Write dist/blockwise-<version>-py3-none-<platform tag>.whl: the blockwise "
        "Python package and a blockwise binary, which pip installs on the environment's PATH.",
    )
    parser.add_argument("--binary", required=True, help="the blockwise executable to ship")
    parser.add_argument(
        "--target",
        default=host_target(),
        help="the binary's target, as compile.sh names it: %s (default: this machine's, %s)"
        % (", ".join(PLATFORM_TAGS), host_target()),
    )
    parser.add_argument(
        "--out", default=os.path.join(REPO, "dist"), help="where to write the wheel (dist/)"
    )
    parser.add_argument(
        "--package",
        default=os.path.join(REPO, "python", NAME),
        help="the package folder (python/blockwise/)",
    )
    args = parser.parse_args(argv)
    try:
        wheel = build(args.binary, args.target, args.out, os.path.abspath(args.package))
    except (BuildError, OSError) as e:
        print("build_wheel.py: %s" % e, file=sys.stderr)
        return 1
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
