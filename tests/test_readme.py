"""The README's two set-up commands are the ones CI and users run."""

import re
import shlex

import pytest
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


def test_readme_python_example_runs(capsys):
    code = re.findall(r"```python\n(.+?)\n```", (REPO / "README.md").read_text(), flags=re.S)[0]
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "0x4000004000010042" in out and "[4240 4242 4244 4246 4248 4250 4252 4254]" in out


def test_readme_user_schedule_runs(capsys):
    code = re.findall(r"```python\n(.+?)\n```", (REPO / "README.md").read_text(), flags=re.S)[1]
    exec(compile(code, "README.md", "exec"), {})
    # first load: 500 ns latency + 32768 B at 20 B/ns = 2138.4 ns; then 8 MMAs of 1200 ns, tensor pipe bound
    assert capsys.readouterr().out.strip() == "11738 ns, races: []"


def plain_blocks():
    """The contents of the README's unlabelled ``` blocks (terminal sessions)."""
    blocks, current, plain = [], None, False
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current, plain = [], line == "```"
            else:
                if plain:
                    blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def readme_cli_examples():
    """(argv, expected lines) for every `$ lapis ...` example; a '...' line ends what is compared."""
    examples = []
    for block in plain_blocks():
        current = None
        for line in block:
            if line.startswith("$ "):
                current = (shlex.split(line[len("$ lapis "):]), []) if line.startswith("$ lapis ") else None
                if current:
                    examples.append(current)
            elif line == "...":
                current = None  # the rest of this output is elided in the README
            elif current is not None:
                current[1].append(line)
    return examples


@pytest.mark.parametrize("argv,expected", readme_cli_examples())
def test_readme_cli_example_output(argv, expected, capsys):
    from lapis.cli import main
    main(argv)
    out = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    want = [line.rstrip() for line in expected if line.strip()]
    got = [line for line in out if line.strip()]
    assert got[: len(want)] == want


def test_the_readme_shows_the_example_role_and_the_kernel_lines_as_they_are():
    """The side-by-side in "Your own schedule" quotes examples/ws_gemm.py's consumer (its first lines, as they are)
    and lines of lapis/gpu/kernels/gemm_ws.cu (each quoted line is in the kernel, in order)."""
    text = (REPO / "README.md").read_text()
    py = next(b for b in re.findall(r"```python\n(.+?)\n```", text, flags=re.S) if b.startswith("def consumer("))
    source = (REPO / "examples" / "ws_gemm.py").read_text()
    start = source.index("def consumer(ctx, ring, role):")
    assert source[start:].startswith(py + "\n")
    cpp = next(b for b in re.findall(r"```cpp\n(.+?)\n```", text, flags=re.S) if "consumer_wait" in b)
    kernel = [line.strip() for line in (REPO / "lapis" / "gpu" / "kernels" / "gemm_ws.cu").read_text().splitlines()]
    at = 0
    for line in (x.strip() for x in cpp.splitlines() if not x.strip().startswith("...")):
        at = kernel.index(line, at) + 1  # ValueError: a quoted line that is not (or no longer) in the kernel
