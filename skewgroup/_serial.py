"""The byte format of a router's state: an ``.npz`` archive (no pickle inside) with a header.

``to_bytes`` output = MAGIC + npz bytes. The archive holds ``__meta__`` (JSON: format version,
strategy, workers, seed, parameters) and one entry per state value. Loading never unpickles, so
state read back from a Spark checkpoint cannot run code.
"""
import io
import json

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
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(
            f"The 'data' parameter must be bytes made by Partitioner.to_bytes(). "
            f"Got {type(data).__name__} instead."
        )
    data = bytes(data)
    if not data.startswith(MAGIC):
        raise ValueError("The 'data' parameter is not a skewgroup partitioner state (bad header).")
    with np.load(io.BytesIO(data[len(MAGIC):]), allow_pickle=False) as archive:
        meta = json.loads(archive["__meta__"].tobytes().decode())
        flat = {}
        for name in archive.files:
            if name != "__meta__":
                value = archive[name]
                flat[name] = value.item() if value.ndim == 0 else value
    state = _unflatten(flat)
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"Unsupported partitioner state format {meta.get('format')!r}.")
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
        node[parts[-1]] = value
    return _tuples(root)


def _tuples(node):
    if not isinstance(node, dict):
        return node
    grouped = {}
    for key, value in node.items():
        value = _tuples(value)
        if "#" in key:
            base, index = key.rsplit("#", 1)
            grouped.setdefault(base, {})[int(index)] = value
        else:
            grouped[key] = value
    for key, value in grouped.items():
        if isinstance(value, dict) and value and all(isinstance(i, int) for i in value):
            grouped[key] = tuple(value[i] for i in range(len(value)))
    return grouped
