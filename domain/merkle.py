"""A Merkle tree in the manner of RFC 6962 / RFC 9162 (Certificate Transparency).

Leaves and inner nodes are hashed with distinct one-byte prefixes (``0x00`` for
a leaf, ``0x01`` for a node), so a leaf can never be passed off as a node. The
tree over ``n`` leaves splits at the largest power of two below ``n``; built
bottom-up, that is the same as promoting the odd node at the end of a level.
An inclusion path holds one sibling hash per level: at most ``ceil(log2 n)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """The hash of one leaf's bytes."""
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def empty_root() -> bytes:
    """The root of a tree without leaves: the hash of nothing (RFC 6962)."""
    return hashlib.sha256(b"").digest()


def _next_level(level: Sequence[bytes]) -> list[bytes]:
    paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
    if len(level) % 2:
        paired.append(level[-1])  # promoted unchanged
    return paired


def merkle_root(leaf_hashes: Sequence[bytes]) -> bytes:
    """The root over leaf hashes, in order."""
    if not leaf_hashes:
        return empty_root()
    level = list(leaf_hashes)
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def inclusion_path(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """The sibling hashes from leaf ``index`` up to the root."""
    if not 0 <= index < len(leaf_hashes):
        raise IndexError("leaf index outside the tree")
    path: list[bytes] = []
    level = list(leaf_hashes)
    while len(level) > 1:
        sibling = index ^ 1
        if sibling < len(level):
            path.append(level[sibling])
        level = _next_level(level)
        index //= 2
    return path


def root_from_path(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes | None:
    """The root an inclusion path leads to (RFC 9162, 2.1.3.2), or None if it cannot fit."""
    if not 0 <= index < size:
        return None
    fn, sn = index, size - 1
    result = leaf
    for sibling in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        return None
    return result
