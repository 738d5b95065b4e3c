"""Deterministic build digests for executor plugins (design.md 11.1).

A build digest is ``sha256:<hex>`` over the RFC 8785 bytes of
``{"code": <code identity>, "config": <canonical configuration>}``. The code
identity is the SHA-256 of the plugin's source files (line endings
normalized), so it is the same on every machine and changes with the code;
the configuration carries the *names* of the variables that hold secrets,
never their values. The same code and configuration give the same digest on
every machine and run; a change to either gives a new build, which the
directory must allow before anything runs on it.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from domain.canonical import canonical_json
from domain.spec import sha256_tag


def code_identity(*modules: ModuleType | str) -> str:
    """``sha256:<hex>`` over the source of ``modules`` (objects or dotted names), in order."""
    digest = hashlib.sha256()
    for item in modules:
        module = importlib.import_module(item) if isinstance(item, str) else item
        source = getattr(module, "__file__", None)
        if not source:
            raise ValueError(f"module {module.__name__} has no source file")
        data = Path(source).read_bytes().replace(b"\r\n", b"\n")
        digest.update(module.__name__.encode() + b"\0")
        digest.update(hashlib.sha256(data).digest())
    return "sha256:" + digest.hexdigest()


def build_digest(code: str, config: Mapping[str, Any]) -> str:
    """The build digest of one executor: code identity plus canonical configuration.

    ``config`` must be JSON-ready (strings, integers, booleans, lists, objects;
    decimals as strings) and hold secret *references* (``env:NAME``), never values.
    """
    return sha256_tag(canonical_json({"code": code, "config": dict(config)}))
