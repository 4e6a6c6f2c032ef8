"""The README opens with the two set-up commands CI and users run, and the docs' Python examples run as shown."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (REPO / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)[:2]


def test_readme_opens_with_the_two_setup_commands():
    main_job, tests = readme_commands()
    assert "pip install ." in main_job and main_job.rstrip().endswith("lapis report")
    assert 'pip install -q ".[test]"' in tests and "pytest" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text()
    assert f"TEST_CMD='{readme_commands()[1]}'" in ci


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.+?)\n```", (REPO / page).read_text(), flags=re.S)


def test_the_layouts_python_example_runs(capsys):
    code = python_blocks("docs/layouts.md")[0]
    exec(compile(code, "docs/layouts.md", "exec"), {})
    out = capsys.readouterr().out
    assert "0x4000004000010042" in out and "[4240 4242 4244 4246 4248 4250 4252 4254]" in out


def test_the_simulator_ring_example_runs(capsys):
    code = next(b for b in python_blocks("docs/simulator.md") if b.startswith("import simpy"))
    exec(compile(code, "docs/simulator.md", "exec"), {})
    # first load: 500 ns latency + 32768 B at 20 B/ns = 2138.4 ns; then 8 MMAs of 1200 ns, tensor pipe bound
    assert capsys.readouterr().out.strip() == "11738 ns, races: []"


def test_the_simulator_page_shows_the_example_role_and_the_kernel_lines_as_they_are():
    """The side-by-side in docs/simulator.md quotes examples/ws_gemm.py's consumer (its first lines, as they are)
    and lines of lapis/gpu/kernels/gemm_ws.cu (each quoted line is in the kernel, in order)."""
    text = (REPO / "docs" / "simulator.md").read_text()
    py = next(b for b in python_blocks("docs/simulator.md") if b.startswith("def consumer("))
    source = (REPO / "examples" / "ws_gemm.py").read_text()
    start = source.index("def consumer(ctx, ring, role):")
    assert source[start:].startswith(py + "\n")
    cpp = next(b for b in re.findall(r"```cpp\n(.+?)\n```", text, flags=re.S) if "consumer_wait" in b)
    kernel = [line.strip() for line in (REPO / "lapis" / "gpu" / "kernels" / "gemm_ws.cu").read_text().splitlines()]
    at = 0
    for line in (x.strip() for x in cpp.splitlines() if not x.strip().startswith("...")):
        at = kernel.index(line, at) + 1  # ValueError: a quoted line that is not (or no longer) in the kernel


def test_the_readme_is_one_screen_and_points_at_the_docs():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 90
    for page in ("layouts", "tma", "simulator", "kernels", "sweeps", "captures", "testing", "timeline-format"):
        assert f"docs/{page}.md" in text


def test_the_docs_name_no_path_of_a_developer_machine():
    """A reader has the repository, not the machine it was written on: pages name repository paths and public
    sources, never /work/... or /home/..."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = [f"{p.relative_to(REPO)}: {m}" for p in pages for m in re.findall(r"/(?:work|home)/\S+", p.read_text())]
    assert found == []


def test_the_code_names_no_path_of_a_developer_machine_or_its_notes():
    """Docstrings and comments cite public sources (the PTX ISA, CUTLASS, the driver API) or repository files,
    never a path on the machine the code was written on nor the developers' own notes files."""
    rule = re.compile(r"/(?:work|home)/\w|\b(?:layout|pipeline|ecosystem)-facts\b")
    files = [p for pattern in ("lapis/**/*.py", "lapis/**/*.cu", "lapis/**/*.cuh", "tests/**/*.py", "examples/*")
             for p in sorted(REPO.glob(pattern)) if p.is_file()]
    found = [f"{p.relative_to(REPO)}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
             if rule.search(line)]
    assert len(files) > 300 and found == []


def test_the_docs_name_the_seed_write_ups_public_sources():
    text = (REPO / "docs" / "simulator.md").read_text()
    assert "IaroslavElistratov/b200-attention" in text and "cloudrift-ai/emmy" in text
