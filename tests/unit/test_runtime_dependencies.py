"""What ``make run`` installs is enough to run: the ledger's modules import only
its runtime dependencies.

``make run`` installs the package without extras; the dev extras (test and lint
tools) and the aws extras (Powertools, Mangum: the Lambda handlers only) come
with the test targets. So a module outside the Lambda handlers that imported an
extra would pass every test and fail for a user of ``make run``. This imports
every such module in a fresh interpreter, builds the app ``ledger serve``
serves, and names any module that came from a distribution only the extras
bring.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("domain", "projections", "adapters", "api")
# Only the Lambda handlers may use the aws extras; nothing may use the dev ones.
LAMBDA_MODULES = ("adapters.aws_lambda", "api.aws_lambda")
DISTRIBUTION = "execution-ledger"


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _requirements(dist_name: str, extra: str | None) -> list[str]:
    """The names a distribution requires: without ``extra``, its unconditional
    requirements (markers other than extras evaluated); with it, that extra's."""
    from packaging.requirements import Requirement

    found = []
    for text in distribution(dist_name).requires or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if extra is None:
            if marker is not None and (
                "extra" in str(marker) or not marker.evaluate({"extra": ""})
            ):
                continue
        elif marker is None or not marker.evaluate({"extra": extra}):
            continue
        found.append(_name(requirement.name))
    return found


def runtime_closure() -> set[str]:
    """Every distribution ``pip install .`` brings, transitively."""
    seen: set[str] = set()
    todo = _requirements(DISTRIBUTION, None)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            todo.extend(_requirements(name, None))
        except PackageNotFoundError:
            continue
    return seen


def extras_only_modules() -> dict[str, str]:
    """Top-level module -> distribution, for what only the dev and aws extras bring."""
    runtime = runtime_closure()
    extras = {
        name
        for extra in ("dev", "aws")
        for name in _requirements(DISTRIBUTION, extra)
        if name not in runtime
    }
    modules = {}
    for module, dists in packages_distributions().items():
        names = {_name(d) for d in dists}
        if names & extras and not names & runtime:
            modules[module] = sorted(names & extras)[0]
    return modules


# What the interpreter loaded before the probe (site's .pth hooks) is not ours.
PROBE = """
import importlib, json, pkgutil, sys
before = set(sys.modules)
packages, skipped = {packages!r}, {skipped!r}
for package in packages:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if not info.name.startswith(skipped):
            importlib.import_module(info.name)
from adapters.bootstrap import build_ledger
from adapters.runtime import build_runtime
from adapters.settings import Settings
from api.http.app import create_app
ledger = build_ledger(Settings(store="memory"))
create_app(Settings(store="memory"), ledger=ledger)
build_runtime(ledger)
ledger.close()
print(json.dumps(sorted({{name.split(".")[0] for name in set(sys.modules) - before}})))
"""


def test_nothing_outside_the_lambda_handlers_imports_an_extra() -> None:
    forbidden = extras_only_modules()
    assert "aws_lambda_powertools" in forbidden and "pytest" in forbidden  # the probe can fail

    probe = PROBE.format(packages=PACKAGES, skipped=LAMBDA_MODULES)
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout.strip().splitlines()[-1])
    leaks = {module: forbidden[module] for module in imported if module in forbidden}
    assert leaks == {}, f"modules from the dev or aws extras imported at run time: {leaks}"


def test_the_lambda_handlers_are_what_needs_the_aws_extras() -> None:
    """The other half of the split: the handlers do use them, so the aws extras
    are not dead weight (infra/lambda/Makefile installs them for the functions)."""
    handlers = (REPO_ROOT / "api" / "aws_lambda.py").read_text() + "".join(
        path.read_text() for path in sorted((REPO_ROOT / "adapters" / "aws_lambda").glob("*.py"))
    )
    assert "from mangum import" in handlers
    assert "from aws_lambda_powertools" in handlers
