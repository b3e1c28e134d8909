# cython: wraparound=True, boundscheck=True
"""The byte format of a router's state: an ``.npz`` archive (no pickle inside) with a header.

``to_bytes`` output = MAGIC + npz bytes. The archive holds ``__meta__`` (JSON: format version,
strategy, workers, seed, parameters) and one entry per state value. Loading never unpickles, so
state read back from a Spark checkpoint cannot run code.
"""
import io
import json
import zipfile

import numpy as np

MAGIC = b"SKEWGRP1"
FORMAT_VERSION = 1


def pack(meta, state):
    buffer = io.BytesIO()
    buffer.write(MAGIC)
    arrays = {"__meta__": np.frombuffer(json.dumps(dict(meta, format=FORMAT_VERSION)).encode(), np.uint8)}
    _flatten("", state, arrays)
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def unpack(data):
    """(meta, state) from ``pack`` output; ValueError for anything that is not such an archive.

    The bytes may come from a checkpoint and be damaged or crafted: every way numpy, zipfile or
    json can fail on them becomes one ValueError, and the layout checks of the state's values
    are the reader's (each router's ``check_state``).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(
            f"The 'data' parameter must be bytes made by Partitioner.to_bytes(). "
            f"Got {type(data).__name__} instead."
        )
    data = bytes(data)
    if not data.startswith(MAGIC):
        raise ValueError("The 'data' parameter is not a skewgroup partitioner state (bad header).")
    try:
        with np.load(io.BytesIO(data[len(MAGIC):]), allow_pickle=False) as archive:
            if "__meta__" not in archive.files:
                raise ValueError("the archive has no '__meta__' entry")
            meta = json.loads(archive["__meta__"].tobytes().decode())
            flat = {}
            for name in archive.files:
                if name != "__meta__":
                    value = archive[name]
                    flat[name] = value.item() if value.ndim == 0 else value
        state = _unflatten(flat)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OSError, EOFError,
            zipfile.BadZipFile, UnicodeDecodeError, RecursionError) as error:
        raise ValueError(f"The 'data' parameter is not a valid skewgroup state archive: "
                         f"{error}") from error
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"Unsupported partitioner state format "
                         f"{meta.get('format') if isinstance(meta, dict) else meta!r}.")
    return meta, state


# Nested state (a dict of dicts, or tuples such as a key map's (keys, values)) is stored flat:
# "a/b" for dict entries, "a#0" for tuple items.
def _flatten(prefix, value, out):
    if isinstance(value, dict):
        for key, item in value.items():
            if "/" in key or "#" in key:
                raise ValueError(f"state key {key!r} may not contain '/' or '#'")
            _flatten(f"{prefix}/{key}" if prefix else key, item, out)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _flatten(f"{prefix}#{i}", item, out)
    else:
        out[prefix] = np.asarray(value)


def _unflatten(flat):
    root = {}
    for name, value in flat.items():
        parts = name.split("/")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"entry {name!r} is nested under a value")
        if parts[-1] in node:
            raise ValueError(f"entry {name!r} is also a group")
        node[parts[-1]] = value
    return _tuples(root)


def _tuples(node):
    if not isinstance(node, dict):
        return node
    grouped = {}
    items = {}
    for key, value in node.items():
        value = _tuples(value)
        if "#" in key:
            base, index = key.rsplit("#", 1)
            if not index.isdigit():
                raise ValueError(f"entry {key!r} has a bad tuple index")
            items.setdefault(base, {})[int(index)] = value
        else:
            grouped[key] = value
    for base, values in items.items():
        if base in grouped or sorted(values) != list(range(len(values))):
            raise ValueError(f"entry {base!r} is not a whole tuple")
        grouped[base] = tuple(values[i] for i in range(len(values)))
    return grouped
