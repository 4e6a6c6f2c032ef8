"""The tree's shape: concept packages, layers that import only downward, no cycles, lazy imports only where the
GPU host needs them. Walks every import statement of every module, the ones inside functions included."""

import ast
import configparser
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lapis"
GPU_HOST_NOTE = "GPU host"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(node, modules=MODULES) -> list[str]:
    """The lapis modules an import statement loads (a `from pkg import mod` names the submodule)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "lapis"]
    if not (node.module or "").startswith("lapis") or node.level:
        return []
    subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
    return subs or [node.module]


def import_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, path in MODULES.items():
        g.add_node(name)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in imported(node):
                    g.add_edge(name, target)
    return g


def layers() -> list[list[str]]:
    """The layers contract of .importlinter, top first: the one place the layering is written."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    text = cfg["importlinter:contract:layers"]["layers"]
    return [[p.strip() for p in line.split("|")] for line in text.strip().splitlines()]


def place(module: str, table: list[list[str]]) -> tuple[int, int] | None:
    """(layer, group within the layer) of a module, or None outside every layer (lapis, lapis.__main__)."""
    for i, group in enumerate(table):
        for j, pkg in enumerate(group):
            if module == pkg or module.startswith(pkg + "."):
                return i, j
    return None


def test_the_top_level_holds_only_init_main_and_errors():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"]


def test_no_import_cycle_even_through_imports_inside_functions():
    cycles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert cycles == []


def test_every_import_goes_down_the_layers():
    """An import may go to a lower layer or stay inside its own package; siblings of one layer (a | b) are
    independent."""
    table = layers()
    assert [g[0] for g in table][:3] == ["lapis.cli", "lapis.report", "lapis.validate"]
    wrong = []
    for a, b in import_graph().edges:
        pa, pb = place(a, table), place(b, table)
        if pa and pb and (pb[0] < pa[0] or (pb[0] == pa[0] and pb[1] != pa[1])):
            wrong.append(f"{a} -> {b}")
    assert wrong == []


def test_every_package_sits_in_a_layer():
    table = layers()
    packages = {m.split(".")[1] for m in MODULES if m.count(".") >= 1} - {"__main__"}
    assert sorted(p for p in packages if place(f"lapis.{p}", table) is None) == []


def test_imports_inside_functions_only_where_the_gpu_host_needs_them():
    """An in-function lapis import is allowed only in a function that says why (the GPU host lacks simpy and
    tensor-layouts), so hidden dependencies cannot come back."""
    hidden = []
    for name, path in MODULES.items():
        source = path.read_text()
        lines = source.splitlines()
        for fn in ast.walk(ast.parse(source)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = "\n".join(lines[fn.lineno - 1:fn.end_lineno])
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and imported(node) and GPU_HOST_NOTE not in body:
                    hidden.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert hidden == []


def test_the_graph_walker_sees_imports_inside_functions(tmp_path):
    """The checks above would pass vacuously if the walker missed function-level imports."""
    src = "def f():\n    from lapis.cli import main\n    import lapis.report.build\n"
    nodes = [n for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [imported(n, {"lapis.cli.main": None}) for n in nodes] == [["lapis.cli.main"], ["lapis.report.build"]]
    assert import_graph().has_edge("lapis.cli.main", "lapis.cli.simulate")  # imported inside _dispatch


def test_tests_mirror_the_package_tree():
    """tests/<package>/ holds the tests of lapis/<package>/; tests/ itself only the tests of the whole tree."""
    tests = ROOT / "tests"
    folders = sorted(p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py")))
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert [f for f in folders if f not in packages] == []
    assert sorted(packages - set(folders)) == ["data"]  # read by the tests of every other package
    assert sorted(p.name for p in tests.glob("test_*.py")) == [
        "test_architecture.py", "test_behaviour_snapshot.py", "test_docs.py", "test_docstrings.py", "test_errors.py",
        "test_readme.py"]
