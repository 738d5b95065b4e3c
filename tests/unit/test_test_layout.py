"""The layout of the tests themselves: what is shared lives in tests/support.

No module under tests/ imports a test module (test_*) or a conftest, and none
imports a module of another test folder; tests/support is the one place every
folder may import from (and it imports from no test folder). Fixtures reach
other folders as pytest plugins registered once in tests/conftest.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SUPPORT = ("tests", "support")


def _module_of(path: Path, root: Path) -> tuple[str, ...]:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(tree: ast.Module, package: tuple[str, ...]) -> list[tuple[tuple[str, ...], int]]:
    """Every module an import names (``from a import b`` names ``a`` and ``a.b``),
    relative imports resolved against ``package``, with the line."""
    found: list[tuple[tuple[str, ...], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((tuple(alias.name.split(".")), node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            target = base + (tuple(node.module.split(".")) if node.module else ())
            found.append((target, node.lineno))
            found.extend(((*target, alias.name), node.lineno) for alias in node.names)
    return found


def _exists(module: tuple[str, ...], root: Path) -> bool:
    path = root.parent.joinpath(*module)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def offences(root: Path) -> list[str]:
    """One line per import under ``root`` (a tests/ folder) that breaks the layout."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module = _module_of(path, root)
        is_package = path.name == "__init__.py"
        package = module if is_package else module[:-1]
        tree = ast.parse(path.read_text(), filename=str(path))
        where = path.relative_to(root.parent)
        for target, line in _imported(tree, package):
            if not target or target[0] != root.name:
                continue
            if not _exists(target, root):
                if not _exists(target[:-1], root):  # an import inside a function fails late
                    found.append(
                        f"{where}:{line} imports {'.'.join(target[:-1])}, which does not exist"
                    )
                continue
            if target[-1].startswith("test_") or target[-1] == "conftest":
                found.append(f"{where}:{line} imports the test module {'.'.join(target)}")
            elif target[:2] == SUPPORT or target == (root.name,):
                continue
            elif module[:2] == SUPPORT:
                found.append(f"{where}:{line}: tests/support imports {'.'.join(target)}")
            elif not (root.parent.joinpath(*target) / "__init__.py").is_file() and target[
                :-1
            ] not in (package, (root.name,)):
                found.append(
                    f"{where}:{line} imports {'.'.join(target)} from another "
                    "test folder (move it to tests/support)"
                )
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets
            ):
                plugins = ast.literal_eval(node.value)
                if path != root / "conftest.py":
                    found.append(f"{where}: pytest_plugins outside {root.name}/conftest.py")
                found.extend(
                    f"{where}: the plugin {name} is not in tests/support"
                    for name in plugins
                    if not name.startswith("tests.support.")
                )
    return found


def test_no_module_under_tests_imports_a_test_module_or_another_folder() -> None:
    assert offences(TESTS) == []


def _plant(root: Path, files: dict[str, str]) -> Path:
    tests = root / "tests"
    for name, text in files.items():
        path = tests / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents]:
            if folder == root:
                break
            (folder / "__init__.py").touch()
        path.write_text(text)
    return tests


BASE = {
    "support/worlds.py": "WORLD = 1\n",
    "a/helpers.py": "HELP = 1\n",
    "a/conftest.py": "import pytest\n",
    "a/test_one.py": "from tests.support.worlds import WORLD\nfrom .helpers import HELP\n",
    "b/test_two.py": "import tests.support.worlds\n",
    "conftest.py": 'pytest_plugins = ["tests.support.worlds"]\n',
}


def test_the_layout_passes_when_shared_code_is_in_support(tmp_path: Path) -> None:
    assert offences(_plant(tmp_path, BASE)) == []


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("b/test_x.py", "from tests.a.test_one import HELP\n", "test module tests.a.test_one"),
        ("b/test_x.py", "from tests.a import test_one\n", "test module tests.a.test_one"),
        ("a/test_x.py", "from .test_one import HELP\n", "test module tests.a.test_one"),
        ("b/test_x.py", "from tests.a.conftest import x\n", "test module tests.a.conftest"),
        ("b/test_x.py", "def f():\n    from ..a.helpers import HELP\n", "another test folder"),
        ("b/test_x.py", "import tests.a.helpers\n", "another test folder"),
        ("b/conftest.py", "from tests.a.helpers import HELP\n", "another test folder"),
        ("a/deep/test_x.py", "from ..helpers import HELP\n", "another test folder"),
        ("b/test_x.py", "def f():\n    from tests.a.moved import HELP\n", "does not exist"),
        ("support/more.py", "from tests.a.helpers import HELP\n", "tests/support imports"),
        ("b/conftest.py", 'pytest_plugins = ["tests.support.worlds"]\n', "pytest_plugins outside"),
        ("conftest.py", 'pytest_plugins = ["tests.a.helpers"]\n', "not in tests/support"),
    ],
)
def test_the_layout_check_finds_each_kind_of_offence(
    tmp_path: Path, name: str, text: str, fragment: str
) -> None:
    found = offences(_plant(tmp_path, {**BASE, name: text}))
    assert len(found) == 1 and fragment in found[0], found
