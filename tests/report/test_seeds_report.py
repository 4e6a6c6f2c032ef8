"""The report's "The seeds' own tables" section: its heading, its numbers (those of `lapis validate seeds`) and
its chart file."""

import re

from lapis.report.seeds import FIGURE, seeds_section
from lapis.validate.seeds import validate_seeds


def test_the_section_states_validate_seeds_numbers_and_draws_its_chart(tmp_path):
    md, numbers = seeds_section(tmp_path)
    assert md.startswith("## The seeds' own tables\n")
    assert f"![The seeds' own tables: predicted against measured]({FIGURE})" in md
    assert (tmp_path / FIGURE).stat().st_size > 10_000
    r = validate_seeds()
    b, e = r["b200"]["summary"], r["rtx5090"]["summary"]
    assert b["rows"] == 54 and e["rows"] == 7  # 18 kernels x 3 shapes; 7 kept moves (lapis/data/seeds/)
    row = re.search(r"^\| B200 progression \| (\d+) \| ([\d.]+) points \| (\d+)/(\d+) \|$", md, re.M)
    assert row.groups() == ("54", f"{b['mean_abs_error']:.1f}", str(b["direction_hits"]), str(b["scored_steps"]))
    assert f"| Emmy moves | 7 | {e['mean_abs_error']:.1f}% |" in md
    assert numbers["seeds"]["b200"] == b and numbers["seeds"]["figure"] == FIGURE
    missed = [x for x in r["b200"]["rows"] if x.get("step", {}).get("scored") and not x["step"]["hit"]]
    for x in missed:
        assert f"kernel {x['kernel']} ({x['change']}) at {x['shape']}: measured" in md
