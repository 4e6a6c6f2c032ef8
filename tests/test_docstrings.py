"""Docstrings and comments under lapis/ describe the code as it is: no issue numbers (history lives in git), and
every repository path (`lapis/...`), dotted module (`lapis.x.y`) or capture folder (`micro/h200-...`) they name
exists. Reads the .py files' docstrings (ast) and comments (tokenize), and the // and /* */ comments of the .cu,
.cuh and .h files. Capture data under lapis/data is not code and is not read; lapis/data/__init__.py is."""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lapis"
CODE_SUFFIXES = (".py", ".cu", ".cuh", ".h")
ISSUE = re.compile(r"\b[Ii]ssue [0-9]+|until issue|before issue|[Ff]ollow-up [0-9]")
# A repository path: lapis/ then name characters and slashes; placeholders (<name>, {x}, ...) and globs (*) cut it.
PATH = re.compile(r"(?<![\w./-])lapis/[\w./*<>{}-]*")
MODULE = re.compile(r"(?<![\w./-])lapis(?:\.[A-Za-z_]\w*)+(?![\w/-])")  # not a format id (lapis.capture/1)
# A capture folder, lapis/data/captures/<kind>/<name>, named as <kind>/<name> or by <name> alone.
CAPTURE = re.compile(r"(?:\b([a-z_]+)/)?\b(h200-20\d\d-\d\d-\d\d(?:-[A-Za-z0-9]+)*)")
CAPTURES = PACKAGE / "data" / "captures"
C_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)




def code_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in CODE_SUFFIXES and p.is_file())


def _marked(paths: list[Path]) -> list:
    """The paths as pytest params named by their repository path."""
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in paths]


def py_text(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment of a Python file."""
    src = path.read_text()
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.append((body[0].lineno, body[0].value.value))
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    return out


def c_text(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every // and /* */ comment of a CUDA/C++ file (string literals skipped)."""
    src = path.read_text()
    return [(src.count("\n", 0, m.start()) + 1, m.group()) for m in C_COMMENT.finditer(src)
            if not m.group().startswith('"')]


def comments(path: Path) -> list[tuple[int, str]]:
    return py_text(path) if path.suffix == ".py" else c_text(path)


def path_exists(ref: str) -> bool:
    """Does `lapis/...` name something in the tree? A placeholder or '...' component stops the check at the folder
    above it; a glob must match at least one path."""
    ref = ref.rstrip(".,;:)'`")
    parts = []
    for part in ref.split("/"):
        if any(c in part for c in "<>{}") or part.startswith("..."):
            return (ROOT / "/".join(parts)).is_dir()
        parts.append(part)
    ref = "/".join(parts)
    if "*" in ref:
        return any(ROOT.glob(ref))
    return (ROOT / ref).exists()


def _module_file(name: str) -> Path | None:
    base = ROOT / name.replace(".", "/")
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}  # lazy exports
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def module_exists(ref: str) -> bool:
    """`lapis.a.b[.attr]`: the longest prefix that is a module file, then (if anything is left) a name it defines
    at top level. Read from the files on disk: importing would pull the GPU host's imports in."""
    parts = ref.split(".")
    for n in range(len(parts), 0, -1):
        f = _module_file(".".join(parts[:n]))
        if f is not None:
            return n == len(parts) or parts[n] in _top_level_names(f)
    return False


def capture_exists(kind: str, name: str) -> bool:
    if kind:
        return (CAPTURES / kind / name).is_dir() or not (CAPTURES / kind).is_dir() and capture_exists("", name)
    return any((d / name).is_dir() for d in CAPTURES.iterdir())


def test_the_reference_checks_see_what_they_should():
    assert path_exists("lapis/gpu/kernels/attention_h200.cu.") and path_exists("lapis/data/captures/")
    assert path_exists("lapis/data/blind/<name>.json") and path_exists("lapis/data/blind/attention_h200*.json")
    assert not path_exists("lapis/gpu/micro_campaign.py") and not path_exists("lapis/captures/micro/")
    assert module_exists("lapis.validate.layouts")
    assert module_exists("lapis.pipeline_sim.schedules.attention_h200.softmax_costs")
    assert not module_exists("lapis.gpu.micro_campaign") and not module_exists("lapis.validate.nothing_here")
    assert module_exists("lapis.layouts.descriptor_for")  # a lazy export, listed in __all__
    assert capture_exists("micro", "h200-2026-11-29") and not capture_exists("micro", "h200-2026-11-28")
    assert ISSUE.search("until issue 10") and not ISSUE.search("issue TMA")


@pytest.mark.parametrize("path", code_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers(path):
    hits = [f"{i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1) if ISSUE.search(line)]
    assert not hits, "history belongs in git, not in the code:\n" + "\n".join(hits)


@pytest.mark.parametrize("path", _marked(code_files()))
def test_named_paths_and_modules_exist(path):
    dead = []
    for line, text in comments(path):
        dead += [f"{line}: {m}" for m in PATH.findall(text) if not path_exists(m)]
        dead += [f"{line}: {m}" for m in MODULE.findall(text) if not module_exists(m)]
        dead += [f"{line}: {k}/{n}".lstrip("/") for k, n in CAPTURE.findall(text) if not capture_exists(k, n)]
    assert not dead, "names that are not in the repository:\n" + "\n".join(dead)
