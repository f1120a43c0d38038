"""``object ls|info|add|put|get|rm``: Object Store buckets and their objects.

``put`` streams a file in chunks and ``get`` streams into one, in bounded
memory, with a progress line on stderr (on a terminal, or with
``--progress``). ``get`` writes to a temporary file next to the target and
renames it only once the object's digest checked out, so an interrupted
or corrupt download never leaves a partial file under the final name.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, cast

from ..object_store import ObjectInfo, ObjectStoreConfig, ObjectStoreStatus
from ._args import STORAGE, add_force_flag, count, duration, size_limit
from ._connect import session
from ._errors import CommandError
from ._output import Output, Progress, escaped, format_bytes, format_time, jsonable, text_fields


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``object`` command group."""
    group = commands.add_parser("object", help="Object Store buckets")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("ls", parents=[common], help="list buckets, or a bucket's objects")
    p.add_argument("bucket", nargs="?", help="list this bucket's objects instead")
    p.set_defaults(run=ls)

    p = sub.add_parser("info", parents=[common], help="a bucket's status, or an object's info")
    p.add_argument("bucket")
    p.add_argument("name", nargs="?", help="the object (default: the bucket's status)")
    p.set_defaults(run=info)

    p = sub.add_parser("add", parents=[common], help="create a bucket")
    p.add_argument("bucket")
    p.add_argument("--ttl", type=duration, help="how long objects are kept (0: forever)")
    p.add_argument("--storage", choices=sorted(STORAGE), default="file")
    p.add_argument("--replicas", type=count, default=1)
    p.add_argument("--max-bucket-size", type=size_limit, help="most bytes in the bucket")
    p.add_argument("--description")
    p.set_defaults(run=add)

    p = sub.add_parser("put", parents=[common], help="store a file")
    p.add_argument("bucket")
    p.add_argument("file", help="the file ('-': stdin, with --name)")
    p.add_argument("--name", help="the object's name (default: the file's name)")
    p.add_argument("--description")
    p.set_defaults(run=put)

    p = sub.add_parser("get", parents=[common], help="fetch an object into a file")
    p.add_argument("bucket")
    p.add_argument("name")
    p.add_argument(
        "-O",
        "--output",
        metavar="FILE",
        help="where to write it ('-': stdout; default: the object's base name "
        "in the current directory)",
    )
    p.add_argument("-f", "--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(run=get)

    p = sub.add_parser("rm", parents=[common], help="delete an object, or a whole bucket")
    p.add_argument("bucket")
    p.add_argument("name", nargs="?", help="the object (default: delete the bucket)")
    add_force_flag(p)
    p.set_defaults(run=rm)


def object_doc(info: ObjectInfo) -> dict[str, Any]:
    """An object's info as a JSON document: the wire form, plus ``name_b64`` for a name whose
    bytes are not UTF-8."""
    doc: dict[str, Any] = jsonable(info)
    doc.update(text_fields("name", info.name))
    return doc


def object_text(info: ObjectInfo) -> str:
    """An object's info for people."""
    name = escaped(info.name)
    text = f"{info.bucket} > {name}: {format_bytes(info.size)} in {info.chunks} chunks"
    text += f", modified {format_time(info.mtime)}"
    if info.link is not None:
        target = info.link.name or "(the whole bucket)"
        text += f", link to {info.link.bucket} > {target}"
    if info.digest:
        text += f", digest {info.digest}"
    if info.description:
        text += f"\n  {info.description}"
    return text


def status_doc(status: ObjectStoreStatus) -> dict[str, Any]:
    """A bucket's status as a JSON document."""
    return {
        "bucket": status.bucket,
        "description": status.description,
        "ttl": status.ttl,
        "storage": status.storage,
        "replicas": status.replicas,
        "sealed": status.sealed,
        "size": status.size,
        "compressed": status.compressed,
        "metadata": status.metadata,
    }


def status_text(status: ObjectStoreStatus) -> str:
    """A bucket's status for people."""
    sealed = ", sealed" if status.sealed else ""
    return f"Bucket {status.bucket}: {format_bytes(status.size)}{sealed}"


class _CountingReader:
    """A binary file whose reads feed a progress line."""

    def __init__(self, file: IO[bytes], progress: Progress) -> None:
        self._file, self._progress = file, progress

    def read(self, n: int = -1) -> bytes:
        data = self._file.read(n)
        self._progress.update(len(data))
        return data


class _CountingWriter:
    """A binary sink whose writes feed a progress line."""

    def __init__(self, file: IO[bytes], progress: Progress) -> None:
        self._file, self._progress = file, progress

    def write(self, data: bytes) -> int:
        written = self._file.write(data)
        self._progress.update(len(data))
        return written


def ls(args: argparse.Namespace, out: Output) -> int:
    """List buckets, or a bucket's objects."""
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        if args.bucket:
            objects = sorted(js.object_store(args.bucket).list(), key=lambda i: i.name)
            docs = [object_doc(o) for o in objects]
            out.result(docs, lambda: "\n".join(map(object_text, objects)) or "no objects")
            return 0
        found = sorted(js.object_stores(), key=lambda s: s.bucket)
    out.result(
        [status_doc(s) for s in found], lambda: "\n".join(map(status_text, found)) or "no buckets"
    )
    return 0


def info(args: argparse.Namespace, out: Output) -> int:
    """Print an object's info, or the bucket's status."""
    with session(args) as nc:
        store = nc.jetstream(timeout=args.timeout).object_store(args.bucket)
        if args.name is None:
            status = store.status()
            out.result(status_doc(status), lambda: status_text(status))
            return 0
        found = store.get_info(args.name)
    out.result(object_doc(found), lambda: object_text(found))
    return 0


def add(args: argparse.Namespace, out: Output) -> int:
    """Create a bucket."""
    config = ObjectStoreConfig(
        bucket=args.bucket,
        ttl=args.ttl or None,
        storage=STORAGE[args.storage],
        replicas=args.replicas,
        max_bytes=args.max_bucket_size,
        description=args.description,
    )
    with session(args) as nc:
        status = nc.jetstream(timeout=args.timeout).create_object_store(config).status()
    out.result(status_doc(status), lambda: f"Created {status_text(status)}")
    return 0


def put(args: argparse.Namespace, out: Output) -> int:
    """Store a file (or stdin) as an object, in chunks."""
    if args.file == "-":
        if not args.name:
            raise CommandError("reading stdin ('-') needs --name")
        source, total = sys.stdin.buffer, None
    else:
        source, total = open(args.file, "rb"), os.path.getsize(args.file)  # noqa: SIM115
    name = args.name or Path(args.file).name
    with contextlib.closing(source), session(args) as nc:
        store = nc.jetstream(timeout=args.timeout).object_store(args.bucket)
        progress = out.progress(f"put {name}", total, args.progress)
        # put() reads anything with read(); the cast only tells the type checker so
        reader = cast(IO[bytes], _CountingReader(source, progress))
        stored = store.put(name, reader, description=args.description)
        progress.done()
    out.result(object_doc(stored), lambda: f"Stored {object_text(stored)}")
    return 0


def get(args: argparse.Namespace, out: Output) -> int:
    """Fetch an object into a file (or stdout), checking its digest before the file appears."""
    target = args.output or Path(args.name).name
    if not target:
        raise CommandError(f"object {args.name!r} has no file name: give --output")
    if target != "-" and os.path.isdir(target):
        raise CommandError(f"{target} is a directory: give --output a file name")
    if target != "-" and os.path.exists(target) and not args.force:
        raise CommandError(f"{target} exists: use --force to overwrite it, or --output")
    with session(args) as nc:
        store = nc.jetstream(timeout=args.timeout).object_store(args.bucket)
        size = store.get_info(args.name).size
        progress = out.progress(f"get {args.name}", size, args.progress)
        if target == "-":
            found = store.get_into(args.name, _CountingWriter(sys.stdout.buffer, progress))
            sys.stdout.buffer.flush()
            progress.done()
            return 0
        found = _get_to_file(store, args.name, target, progress)
        progress.done()
    out.result(
        {"file": os.path.abspath(target), **object_doc(found)},
        lambda: f"Wrote {object_text(found)} to {target}",
    )
    return 0


def _get_to_file(store: Any, name: str, target: str, progress: Progress) -> ObjectInfo:
    """Write into a temporary file beside ``target``; rename it only when complete and checked."""
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, partial = tempfile.mkstemp(
            prefix=f".{Path(target).name}.", suffix=".partial", dir=directory
        )
    except OSError as exc:  # named by the file asked for, not the hidden temporary one
        raise OSError(exc.errno, exc.strerror, target) from None
    try:
        with os.fdopen(fd, "wb") as file:
            found: ObjectInfo = store.get_into(name, _CountingWriter(file, progress))
            file.flush()
            os.fsync(file.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)  # what open() would have given, not mkstemp's 0600
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return found


def rm(args: argparse.Namespace, out: Output) -> int:
    """Delete an object, or the whole bucket when no name is given."""
    with session(args) as nc:
        js = nc.jetstream(timeout=args.timeout)
        if args.name is None:
            js.delete_object_store(args.bucket)
            out.result({"bucket": args.bucket, "deleted": True}, f"Deleted bucket {args.bucket}")
            return 0
        js.object_store(args.bucket).delete(args.name)
    out.result(
        {"bucket": args.bucket, **text_fields("name", args.name), "deleted": True},
        f"Deleted {args.bucket} > {escaped(args.name)}",
    )
    return 0
