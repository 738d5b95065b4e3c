"""The README's "Connect with a client" runs exactly as written against a real
`ledger serve`: the shared set-up block, then the Python example and the
TypeScript example, each at most 10 lines of client code, each printing
`succeeded`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.http_server import free_port, ledger_command, wait_until_up
from tests.support.ministack import REPO_ROOT

pytestmark = pytest.mark.slow

MAX_CLIENT_LINES = 10
TYPESCRIPT = REPO_ROOT / "clients" / "typescript"
SERVER_PACKAGES = ("domain", "projections", "adapters", "api")


def readme_block(name: str, language: str) -> str:
    text = (REPO_ROOT / "README.md").read_text()
    found = re.search(
        rf"<!-- {name}:start -->\s*```{language}\n(.*?)```\s*<!-- {name}:end -->", text, re.S
    )
    assert found, f"README {name} markers not found"
    return found.group(1)


def code_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    workdir = tmp_path_factory.mktemp("readme-clients")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))}
    env.update({"LEDGER_SQLITE_PATH": str(workdir / "ledger.db"), "PYTHONUNBUFFERED": "1"})
    port = free_port()
    log = workdir / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*ledger_command(), "serve", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_up(process, f"http://127.0.0.1:{port}/readyz", log)
        yield f"http://127.0.0.1:{port}", env
    finally:
        process.terminate()
        process.wait(timeout=15)


def run_after_setup(
    server: tuple[str, dict[str, str]], command: str
) -> subprocess.CompletedProcess[str]:
    """The set-up block verbatim, then ``command`` in the same shell (its exports)."""
    url, env = server
    script = readme_block("clients-setup", "sh") + "\n" + command
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=REPO_ROOT,
        env={**env, "LEDGER_URL": url},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_each_example_is_at_most_ten_lines_of_client_code() -> None:
    python = code_lines(readme_block("client-python", "python"))
    typescript = code_lines(readme_block("client-typescript", "ts"))
    assert len(python) <= MAX_CLIENT_LINES, python
    assert len(typescript) <= MAX_CLIENT_LINES, typescript
    imports = [line for line in python if re.match(r"(from \S+ )?import ", line)]
    assert not [line for line in imports if line.split()[1].split(".")[0] in SERVER_PACKAGES]


def test_the_python_example_runs_as_written(
    server: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    example = tmp_path / "assistant.py"
    example.write_text(readme_block("client-python", "python"))
    done = run_after_setup(server, f'{sys.executable} "{example}"')
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines() == ["succeeded"], done.stdout + done.stderr


def test_the_typescript_example_runs_as_written(server: tuple[str, dict[str, str]]) -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    tsc = TYPESCRIPT / "node_modules" / ".bin" / "tsc"
    if node is None or npm is None or not tsc.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("node, npm and clients/typescript/node_modules are needed in CI")
        pytest.skip("the TypeScript client is not installed here: run `make test-typescript`")
    if not (TYPESCRIPT / "dist" / "index.js").exists():
        subprocess.run([npm, "run", "--silent", "build"], cwd=TYPESCRIPT, check=True, timeout=180)
    folder = TYPESCRIPT / "build" / "readme"  # inside the package: it imports itself by name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "assistant.mts").write_text(readme_block("client-typescript", "ts"))
    compiled = subprocess.run(
        [str(tsc), "--strict", "--module", "nodenext", "--moduleResolution", "nodenext",
         "--target", "es2022", "--types", "node", "--skipLibCheck", "assistant.mts"],
        cwd=folder, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    done = run_after_setup(server, f'{node} "{folder / "assistant.mjs"}"')
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines() == ["succeeded"], done.stdout + done.stderr
