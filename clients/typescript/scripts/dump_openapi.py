"""Write the server's OpenAPI document, as `ledger serve` publishes it, to a file.

    python clients/typescript/scripts/dump_openapi.py clients/typescript/build/openapi.json

The TypeScript client's types (src/openapi.ts) are generated from it with
openapi-typescript; `make test` fails when the committed ones are stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from adapters.settings import load_settings
from api.http.app import create_app


def main(out: str) -> None:
    document = create_app(load_settings(store="memory", env="test")).openapi()
    document["info"].pop("version", None)  # the package version is not part of the types
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: dump_openapi.py OUT.json")
    main(sys.argv[1])
