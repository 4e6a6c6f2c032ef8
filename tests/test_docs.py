"""The docs agree with the code: every generated region of README.md and docs/*.md is what docs/generate.py
writes now (transcripts of lapis commands run in this process, tables computed from the captures)."""

import gzip
import importlib.util
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def generator():
    spec = importlib.util.spec_from_file_location("docs_generate", REPO / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_region_matches_the_code(capsys):
    code = generator().main(["--check"])
    out = capsys.readouterr().out
    assert code == 0, f"run `python docs/generate.py`; differences:\n{out}"


def test_the_check_fails_on_a_stale_region(tmp_path, monkeypatch):
    gen = generator()
    page = tmp_path / "page.md"
    page.write_text("<!-- generated: python: docs_values.exit_codes -->\nExit status: 0 only.\n<!-- end generated -->\n")
    monkeypatch.setattr(gen, "pages", lambda: [page])
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert gen.main(["--check"]) == 1
    assert page.read_text().endswith("Exit status: 0 only.\n<!-- end generated -->\n")  # --check writes nothing
    assert gen.main([]) == 0 and "4 race (lapis simulate --races)" in page.read_text()
    assert gen.main(["--check"]) == 0


def anchors(page: Path) -> set[str]:
    """GitHub's heading slugs (lower case, punctuation dropped, spaces to hyphens) and the page's <a id="...">."""
    text = page.read_text()
    heads = re.findall(r"^#+ (.+)$", text, flags=re.M)
    slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}
    return slugs | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_every_link_between_pages_reaches_a_page_and_a_heading():
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)", page.read_text()):
            if not target and not anchor:
                continue
            linked = (page.parent / target) if target else page
            assert linked.exists(), f"{page.name} links {target}, which does not exist"
            assert not anchor or anchor in anchors(linked), f"{page.name} links {target}#{anchor}: no such heading"


def test_the_check_names_a_stale_cached_value_without_recomputing_it(tmp_path, monkeypatch):
    gen = generator()
    inputs = tmp_path / "predictions.json"
    inputs.write_text("{}")
    monkeypatch.setattr(gen, "CACHE", tmp_path / "cache.json")
    calls = []

    def compute():
        calls.append(1)
        return "value"

    assert gen.cached("v", [inputs], compute) == "value" and len(calls) == 1  # written
    assert gen.cached("v", [inputs], compute) == "value" and len(calls) == 1  # read back
    inputs.write_text('{"new": 1}')  # the inputs change: stale
    monkeypatch.setattr(gen, "WRITE_CACHE", False)
    assert gen.cached("v", [inputs], compute) == "value" and len(calls) == 1  # --check does not recompute
    assert gen.STALE_CACHE == ["v"]


def test_a_damaged_cache_is_recomputed_not_trusted(tmp_path, monkeypatch, capsys):
    gen = generator()
    cache = tmp_path / "cache.json.gz"
    monkeypatch.setattr(gen, "CACHE", cache)
    good = {"a": {"key": "k", "value": "v"}}
    for damaged, said in ((b"not gzip", "unreadable (BadGzipFile)"),
                          (gzip.compress(json.dumps(good).encode())[:20], "unreadable (EOFError)"),
                          (gzip.compress(b"[1, 2]"), "not a JSON object")):
        cache.write_bytes(damaged)
        assert gen._read_cache() == {}
        assert said in capsys.readouterr().err
    cache.write_bytes(gzip.compress(json.dumps({**good, "b": 3, "c": {"key": "k", "value": 12345}}).encode()))
    assert gen._read_cache() == good
    assert "dropped malformed entries ['b', 'c']" in capsys.readouterr().err
    cache.write_bytes(b"not gzip")
    assert gen.cached("a", [], lambda: "fresh") == "fresh"  # recomputed, and the file rewritten whole
    assert json.loads(gzip.decompress(cache.read_bytes()))["a"]["value"] == "fresh"
