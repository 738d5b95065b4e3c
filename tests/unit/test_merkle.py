"""The Merkle tree against a recursive RFC 6962 reference, and its proofs."""

from __future__ import annotations

import hashlib

import pytest

from domain.merkle import (
    empty_root,
    inclusion_path,
    leaf_hash,
    merkle_root,
    node_hash,
    root_from_path,
)


def reference_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1, literally: split at the largest power of two below n."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(reference_root(leaves[:k]), reference_root(leaves[k:]))


def leaves(n: int) -> list[bytes]:
    return [leaf_hash(f"leaf-{i}".encode()) for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 33, 100])
def test_root_equals_the_rfc6962_reference(n: int) -> None:
    assert merkle_root(leaves(n)) == reference_root(leaves(n))


def test_leaf_and_node_hashes_are_domain_separated() -> None:
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    # A node's input (0x01 || a || b) hashed as a leaf gives another value.
    assert leaf_hash(a + b) != node_hash(a, b)
    assert merkle_root([]) == empty_root()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 8, 13, 64, 65])
def test_every_inclusion_path_leads_to_the_root(n: int) -> None:
    tree = leaves(n)
    root = merkle_root(tree)
    for index in range(n):
        path = inclusion_path(tree, index)
        assert len(path) <= max(1, (n - 1).bit_length())
        assert root_from_path(tree[index], index, n, path) == root


def test_a_path_proves_only_its_own_leaf_and_position() -> None:
    tree = leaves(11)
    root = merkle_root(tree)
    path = inclusion_path(tree, 4)
    assert root_from_path(tree[5], 4, 11, path) != root
    assert root_from_path(tree[4], 5, 11, path) != root
    assert root_from_path(tree[4], 4, 11, path[:-1]) != root
    assert root_from_path(tree[4], 4, 11, [*path, path[0]]) is None
    assert root_from_path(tree[4], 11, 11, path) is None


def test_path_length_is_logarithmic() -> None:
    tree = leaves(1000)
    assert max(len(inclusion_path(tree, i)) for i in (0, 500, 999)) <= 10
