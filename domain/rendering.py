"""The default deterministic preview renderer.

The preview is what the actor approves. It names every semantic field of the
spec, so the view hash (which also binds the full payload hash) changes
whenever anything about the effect changes.
"""

from __future__ import annotations

import json

from domain.spec import ProposalSpec, format_utc, sha256_tag

RENDERER_SOURCE_VERSION = "text-renderer/v1"


class TextRenderer:
    """Plain-text preview: one line per field, content as sorted JSON."""

    build = sha256_tag(RENDERER_SOURCE_VERSION.encode())

    def render(self, spec: ProposalSpec) -> str:
        lines = [
            f"Action: {spec.effect} via {spec.capability}",
            f"Destination: {spec.destination}",
        ]
        if spec.target is not None:
            lines.append(f"Target: {spec.target.id} (revision {spec.target.base_revision})")
        lines += [
            f"Permission: {spec.permission}",
            "Content: " + json.dumps(spec.content, sort_keys=True, ensure_ascii=False),
            "Sources: " + (", ".join(spec.sources) if spec.sources else "(none)"),
            f"Expires: {format_utc(spec.expires_at)}",
            f"Executor build: {spec.executor_build}",
            f"Plugin build: {spec.plugin_build}",
            f"Schema: {spec.schema_digest}",
            f"Policy: {spec.policy_digest}",
        ]
        return "\n".join(lines)
