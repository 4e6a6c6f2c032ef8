"""Write every generated region of README.md and docs/*.md from the code and the captures, or check them.

    python docs/generate.py            # rewrite the regions in place
    python docs/generate.py --check    # exit 1 listing the regions that differ (tests/test_docs.py runs this)

A generated region sits between two HTML comments, which Markdown does not show:

    <!-- generated: lapis ARGS [| FILTER ...] -->
    ...                                      (a ``` block: the "$ lapis ARGS" line, then what the command printed)
    <!-- end generated -->

    <!-- generated: python: docs_values.NAME -->
    ...                                      (the text docs_values.NAME() returns: a table, a sentence, a code block)
    <!-- end generated -->

`lapis ARGS` runs in this process through lapis.cli.main.main (stdout captured, stderr dropped; the exit status is
not shown). Filters, applied left to right:
- `head N`: keep the first N lines of the output, then a line "..." (the rest is elided on the page);
- `grep TEXT`: keep the first line (a table's header) and the lines that contain TEXT;
- `in-tmp`: run the command in a fresh temporary folder (for commands that write an output folder: the page's
  relative `--out` path is then new on every run, and paths print as on the page);
- `cached`: keep the output in docs/.generate-cache.json.gz (below); for commands that take more than a few seconds;
- `no-wallclock`: drop the wall-clock parts of an output (" in 2.04 s" after an event count, "computed in 0.7 s"),
  which change from run to run; the page shows the line without them.
Commands must print the same thing on every machine: no wall-clock times (filter them), no absolute paths.

docs_values.NAME functions read the captures and the code only (never a GPU, never the clock). A value that needs
simulations is cached in docs/.generate-cache.json.gz under the SHA-256 of its name, the source of the function that
computes it and model_inputs() (the prediction cache, the capture index, the profiles); `python docs/generate.py`
recomputes a stale entry, `--check` fails on it (recomputing takes minutes) and names it.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gzip
import hashlib
import inspect
import io
import json
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
CACHE = DOCS / ".generate-cache.json.gz"  # gzip (no timestamp): the tree stays under its byte budget
REGION = re.compile(r"^(<!-- generated: (?P<spec>.+?) -->\n)(?P<body>.*?)^(<!-- end generated -->)", re.S | re.M)
WRITE_CACHE = True  # main(["--check"]) sets it False
STALE_CACHE: list[str] = []  # the cached values --check found stale
WALLCLOCK = (re.compile(r"(\d+ events) in [0-9.]+ s"), re.compile(r" in [0-9.]+ s(?=[,;)])"))


def pages() -> list[Path]:
    """The pages that may hold generated regions: README.md and every docs/*.md."""
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


# ------------------------------------------------------------------------------------------------ commands --

@contextlib.contextmanager
def _chdir(path: str):  # contextlib.chdir is Python 3.11+; lapis supports 3.10
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_lapis(argv: list[str], in_tmp: bool = False) -> str:
    """What `lapis ARGV` prints on stdout, run in this process (in_tmp: in a fresh temporary folder, so relative
    output paths such as --out are new and print without an absolute path)."""
    from lapis.cli.main import main

    out = io.StringIO()
    with contextlib.ExitStack() as stack:
        if in_tmp:
            stack.enter_context(_chdir(stack.enter_context(tempfile.TemporaryDirectory())))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
        try:
            main(argv)
        except SystemExit:  # argparse's --help and usage errors
            pass
    return out.getvalue()


def apply_filters(text: str, filters: list[str]) -> str:
    lines = text.rstrip("\n").splitlines()
    for f in filters:
        words = f.split()
        if words[0] == "head" and len(words) == 2:
            n = int(words[1])
            lines = lines[:n] + (["..."] if len(lines) > n else [])
        elif words[0] == "grep" and len(words) == 2:
            lines = lines[:1] + [line for line in lines[1:] if words[1] in line]
        elif words == ["no-wallclock"]:
            lines = [WALLCLOCK[1].sub("", WALLCLOCK[0].sub(r"\1", line)) for line in lines]
        else:
            raise SystemExit(f"docs/generate.py: unknown filter {f!r} (head N, grep TEXT, no-wallclock, in-tmp, cached)")
    return "\n".join(line.rstrip() for line in lines)


def command_region(spec: str) -> str:
    command, *filters = [part.strip() for part in spec.split(" | ")]
    argv = shlex.split(command)
    in_tmp = "in-tmp" in filters
    filters = [f for f in filters if f != "in-tmp"]
    if "cached" in filters:  # a slow command: its output is kept under the hash of the model's inputs
        filters.remove("cached")
        raw = cached(command, model_inputs(), lambda: run_lapis(argv[1:], in_tmp))
    else:
        raw = run_lapis(argv[1:], in_tmp)
    output = apply_filters(raw, filters)
    return f"```text\n$ {command}\n{output}\n```\n"


# ------------------------------------------------------------------------------------------------- values --

def model_inputs() -> list[Path]:
    """What a prediction-dependent value is cached under: the prediction cache (its keys carry the model and profile
    hashes, so a change to lapis/pipeline_sim or lapis/model changes it once the cache is refreshed), the capture
    index and the profiles."""
    data = REPO / "lapis" / "data"
    return [data / "predictions.json.gz", data / "index.json", *sorted((data / "profiles").glob("*.json"))]


_CACHE_WARNED: set[str] = set()  # what _read_cache has said once


def _warn_once(text: str) -> None:
    if text not in _CACHE_WARNED:
        _CACHE_WARNED.add(text)
        print(text, file=sys.stderr)


def _read_cache() -> dict:
    """CACHE's entries ({name: {"key": str, "value": str}}); an unreadable file (not gzip, cut short, not a JSON
    object) counts as empty and a malformed entry as absent, each said on stderr, so they are recomputed (or, with
    --check, reported stale) rather than trusted."""
    if not CACHE.exists():
        return {}
    try:
        store = json.loads(gzip.decompress(CACHE.read_bytes()))
    except (OSError, EOFError, ValueError) as e:  # BadGzipFile is an OSError; JSONDecodeError a ValueError
        _warn_once(f"docs/generate.py: {CACHE} unreadable ({type(e).__name__}); recomputing its values")
        return {}
    if not isinstance(store, dict):
        _warn_once(f"docs/generate.py: {CACHE} is not a JSON object; recomputing its values")
        return {}
    ok = {k: v for k, v in store.items()
          if isinstance(v, dict) and isinstance(v.get("key"), str) and isinstance(v.get("value"), str)}
    if len(ok) < len(store):
        _warn_once(f"docs/generate.py: {CACHE}: dropped malformed entries {sorted(set(store) - set(ok))}")
    return ok


def cached(name: str, inputs: list[Path], compute):
    """compute() from docs/.generate-cache.json.gz when the key stored under `name` is the SHA-256 of `name`, the
    source of `compute` and the bytes of `inputs`; else computed (and stored, unless --check)."""
    h = hashlib.sha256(name.encode())
    h.update(inspect.getsource(compute).encode())
    for p in inputs:
        h.update(p.read_bytes())
    key = h.hexdigest()
    store = _read_cache()
    if store.get(name, {}).get("key") == key:
        return store[name]["value"]
    if not WRITE_CACHE:  # --check: recomputing takes minutes; a stale entry fails the check instead
        STALE_CACHE.append(name)
        return store.get(name, {}).get("value", "")
    value = compute()
    store[name] = {"key": key, "value": value}
    CACHE.write_bytes(gzip.compress((json.dumps(store, indent=1, sort_keys=True) + "\n").encode(), mtime=0))
    return value


def _blind(prefix: str) -> dict:
    """(variant, shape, causal) -> blind predicted TFLOP/s over lapis/data/blind/<prefix>*.json."""
    from lapis.data import BLIND

    return {(e["variant"], e["shape"], bool(e.get("causal", False))): e["tflops"]
            for p in sorted(BLIND.glob(f"{prefix}*.json")) for e in json.loads(p.read_text())["entries"]}


def _attention_table(causal: bool) -> str:
    """The timed attention kernels (lapis.captures.attention.rows: the latest capture of each case), their blind
    predictions (lapis/data/blind/attention_h200*.json) and the ratio to cuDNN in the same run."""
    from lapis.captures import attention as ac
    from lapis.captures.store import captures_root

    blind = _blind("attention_h200")
    md = ["| variant | shape | measured TFLOP/s | spread % | ratio to cuDNN | blind predicted TFLOP/s | blind err % "
          "| capture |", "|---|---|---:|---:|---:|---:|---:|---|"]
    rows = [r for r in ac.rows(captures_root(None, kinds=(ac.KIND,))) if r["causal"] == causal]
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    for r in sorted(rows, key=lambda r: (variants.index(r["variant"]), shapes.index(r["shape"]))):
        b = blind.get((r["variant"], r["shape"], r["causal"]))
        err = "-" if b is None else f"{100 * (b - r['tflops']) / r['tflops']:+.0f}"
        md.append(f"| `{r['variant']}`{' causal' if causal else ''} | {r['shape']} | {r['tflops']:.0f} | "
                  f"{r['spread_pct']:.2f} | {r['ratio_to_cudnn']:.3f} | {'-' if b is None else f'{b:.0f}'} | {err} | "
                  f"`{r['capture']}` |")
    return "\n".join(md)


def _third_party_table() -> str:
    """The race captures (lapis.gpu.race): every kernel timed in one process with cuDNN as the reference, and the
    blind predictions of lapis.catalog.third_party (a configuration in the kernel's `seen` list is not blind)."""
    from lapis.captures.store import captures_root
    from lapis.catalog.third_party import KERNELS

    by_timed = {k["timed"]: (name, k) for name, k in KERNELS.items() if k["timed"]}
    blind = {}
    for name, k in KERNELS.items():
        blind.update({(name, s, c): v for (_, s, c), v in _blind(k["blind"]).items()})
    md = ["| capture | shape | causal | kernel | median µs | TFLOP/s | spread % | ratio to cuDNN (per round) "
          "| SM MHz (bracket) | blind predicted TFLOP/s | blind err % |",
          "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    root = captures_root(None)
    for folder in sorted((root / "race").iterdir()):
        m = json.loads((folder / "manifest.json").read_text())
        for r in m["results"]:
            for kernel, k in r["kernels"].items():
                tflops = r["flops"] / k["median_us"] / 1e6
                name, entry = by_timed.get(kernel, (None, None))
                b = blind.get((name, r["shape"], r["causal"])) if name else None
                seen = entry is not None and (r["shape"], r["causal"]) in entry["seen"]
                bl = "-" if b is None else (f"{b:.0f} (seen first)" if seen else f"{b:.0f}")
                err = "-" if b is None or seen else f"{100 * (b - tflops) / tflops:+.0f}"
                md.append(f"| `{folder.name}` | {r['shape']} | {'yes' if r['causal'] else 'no'} | `{kernel}` | "
                          f"{k['median_us']:.1f} | {tflops:.0f} | {k['spread_pct']:.2f} | "
                          f"{k['speedup_to_reference']['median']:.3f} | {_bracket_mhz(k)} | {bl} | {err} |")
    return "\n".join(md)


def _bracket_mhz(k: dict) -> str:
    """A race kernel's bracket clock (lapis.gpu.protocol: the SM's mean clock over its batch), '-' before the
    races had it."""
    mhz = (k.get("clock") or {}).get("bracket_mhz_median")
    return "-" if mhz is None else f"{mhz:.0f}"


def _validation_headline() -> str:
    """`lapis validate timelines`'s headline from the committed prediction cache (cached here: it takes minutes)."""
    def compute() -> str:
        from lapis.validate.timelines import validate_timelines

        r = validate_timelines(None, figures=None, progress=False, gantts=False, resimulate=False)
        return (f"{r['cases']} cases ({r['scored']} scored): mean |error| {r['mape_pct']:.1f}% (blind predictions: "
                f"{r['mape_pct_blind']:.1f}% over {r['blind_cases']} blind cases), max |error| "
                f"{r['max_abs_err_pct']:.1f}%; in SM cycles ({r.get('cycles_cases', 0)} cases whose capture probed "
                f"the clock): mean {r['mape_cycles_pct']:.1f}%, max {r['max_abs_cycles_err_pct']:.1f}%; rank "
                f"agreement {r['rank_agreement']:.0%} over {r['rank_pairs']} pairs whose measured gap exceeds "
                f"2 x {r['spread_pct']:.2f}% (the run-to-run spread).")

    return cached("validation_headline", model_inputs(), compute)


STEPS = (("s1", "s2"), ("s2", "s3"), ("s3", "s4"), ("s4", "s5"), ("s5", "s6"), ("s6", "s6_emu8"), ("s6", "s6_emu4"),
         ("s6", "s7"), ("s7", "s8"), ("s8", "s9"))
STEP_CAPTURE = "attention/h200-2026-11-30-probe"  # s1-s9 at the five shapes in one run


def _steps_table() -> str:
    """Each step's speed-up over the five shapes, measured in one run (STEP_CAPTURE) and predicted now."""
    def compute() -> str:
        from lapis.captures import attention as ac
        from lapis.captures.store import captures_root
        from lapis.report.kernels import kernel_rows

        pred = {(r["variant"], r["shape"]): r["predicted_tflops"] for r in kernel_rows(None) if not r["causal"]}
        meas = {(r["variant"], r["shape"]): r["tflops"] for r in ac.measurements(captures_root(None, kinds=(ac.KIND,)))
                if r["capture"] == STEP_CAPTURE and not r["causal"]}

        def span(table, a, b) -> str:
            g = [100 * (table[b, s] / table[a, s] - 1) for (v, s) in table if v == a and (b, s) in table]
            return f"{min(g):+.0f} to {max(g):+.0f}% ({len(g)} shapes)" if g else "-"

        md = ["| step | measured speed-up | predicted speed-up (now) |", "|---|---|---|"]
        md += [f"| {a} -> {b} | {span(meas, a, b)} | {span(pred, a, b)} |" for a, b in STEPS]
        return "\n".join(md)

    return cached("steps_table", model_inputs(), compute)


def _race_steps_table() -> str:
    """The steps past s9 against the variant before each, in one race (lapis.report.kernels.step_rows)."""
    def compute() -> str:
        from lapis.report.kernels import step_rows

        md = ["| step | over | shape | causal | measured gain % | predicted gain % (now) | capture |",
              "|---|---|---|---|---:|---:|---|"]
        md += [f"| `{r['step']}` | `{r['base']}` | {r['shape']} | {'yes' if r['causal'] else 'no'} | "
               f"{r['measured_gain_pct']:+.1f} | {r['predicted_gain_pct']:+.1f} | `{r['capture']}` |"
               for r in step_rows(None)]
        return "\n".join(md)

    return cached("race_steps_table", model_inputs(), compute)


def _gemm_table() -> str:
    """lapis.report.calibration.gemm_rows: the GEMM capture, its blind predictions and the current ones."""
    def compute() -> str:
        from lapis.report.calibration import gemm_rows

        f = lambda x, fmt: "-" if x is None else format(x, fmt)  # noqa: E731
        md = ["| variant | shape | blind predicted µs | measured µs | blind err % | predicted now µs | err now % "
              "| spread % | cuBLAS TFLOP/s | SM MHz |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        md += [f"| `{r['variant']}` | {r['shape']} | {f(r['blind_predicted_us'], '.1f')} | {r['measured_us']:.1f} | "
               f"{f(r['blind_err_pct'], '+.1f')} | {f(r['predicted_us'], '.1f')} | {f(r['err_pct'], '+.1f')} | "
               f"{r['spread_pct']:.2f} | {f(r['cublas_tflops'], '.0f')} | {f(r['sm_clock_mhz'], '.0f')} |"
               for r in gemm_rows(None)]
        return "\n".join(md)

    return cached("gemm_table", model_inputs(), compute)


SWEEP_CAPTURE = "sweep/h200-2026-11-30-s8"  # the H200 run of `lapis sweep --validate-top 2`


def _sweep_validated() -> str:
    """The measured rows of the sweep capture's validated.csv (predictions as that run made them)."""
    import csv

    from lapis.captures.store import captures_root

    rows = list(csv.DictReader((captures_root(None) / SWEEP_CAPTURE / "validated.csv").open()))
    md = ["| block_n | stages | consumer WGs | shape | kernel | predicted TFLOP/s (that run's model) "
          "| measured TFLOP/s |", "|---:|---:|---:|---|---|---:|---:|"]
    md += [f"| {r['block_n']} | {r['stages']} | {r['consumer_wgs']} | {r['shape']} | `{r['kernel']}` | "
           f"{float(r['tflops']):.1f} | {float(r['measured_tflops']):.0f} |" for r in rows if r["measured_tflops"]]
    return "\n".join(md)


LIMIT_MEANINGS = {  # what each lapis.captures.safe.LIMITS entry caps (its docstring says the same)
    "json_bytes": "a JSON file of a capture (manifest.json, results.json, sanitizer.json, ...)",
    "archive_bytes": "an `.npz` or packed timelines file on disk",
    "array_bytes": "one array: the shape its `.npy` or packed header declares times the item size, and an `.npz` "
                   "member's declared inflated size (inflation stops there)",
    "archive_inflated_bytes": "every array read from one archive, inflated, together",
    "archive_members": "arrays in one archive",
}


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else str(n)


class docs_values:  # noqa: N801 -- the name the markers use
    """Each function returns the text of one `python: docs_values.NAME` region (no trailing newline needed)."""

    @staticmethod
    def exit_codes() -> str:
        from lapis.cli.parser import EXIT_MEANINGS

        return "Exit status, the same for every command: " + "; ".join(
            f"{c} {m}" for c, m in EXIT_MEANINGS.items()) + "."

    @staticmethod
    def attention_table() -> str:
        return _attention_table(causal=False)

    @staticmethod
    def attention_causal_table() -> str:
        return _attention_table(causal=True)

    @staticmethod
    def third_party_table() -> str:
        return _third_party_table()

    @staticmethod
    def profile_table() -> str:
        """The h200 profile's values other than the softmax contention ones (lapis/data/profiles/h200.json)."""
        from lapis.report.calibration import profile_numbers

        md = ["| value | number | unit | source |", "|---|---:|---|---|"]
        for k, v in profile_numbers("h200")["values"].items():
            if not k.startswith(("softmax_", "gemm_pair_")):
                md.append(f"| `{k}` | {v['value']:g} | {v['unit']} | {str(v['source']).split(':')[0]} |")
        return "\n".join(md)

    @staticmethod
    def contention_table() -> str:
        """Per softmax flavour, the contend states the schedules cost the softmax by (lapis.model.contend over
        micro_mix_softmax_v3.cu's SASS, lapis/data/consumer_loops.json) beside the contend capture's measurement."""
        from lapis.model import consumer_loop, contend
        from lapis.validate.micro import CONTEND_CAPTURE, _measurements

        ref, meas = consumer_loop.load()["micro_reference"], _measurements(CONTEND_CAPTURE)
        cols = ("s", "ss", "st", "ts")
        md = ["| softmax flavour: predicted (measured) cycles | softmax tile alone | beside another softmax | beside "
              "GEMMs in flight | GEMM pair (QK + PV) beside this softmax |", "|---|---:|---:|---:|---:|"]
        for f, r in ref.items():
            c = contend.Contend(**r["contend"])
            cells = [f"{contend.state_cycles(c, st):.0f} ({1 / meas[f'contend.{f}.{st}']['value']['median']:.0f})"
                     for st in cols]
            md.append(f"| {f} | " + " | ".join(cells) + " |")
        return "\n".join(md)

    @staticmethod
    def props_summary() -> str:
        """The H200 run of examples/test_my_layouts.py (props/h200-2026-12-01/props.json)."""
        from lapis.captures.store import captures_root

        p = json.loads((captures_root(None) / "props" / "h200-2026-12-01" / "props.json").read_text())
        o, c, b = p["oracle"], p["clean"], p["planted"]
        return (f"On the H200 (`lapis/data/captures/props/h200-2026-12-01`, {p['ping']['device']}): the clean suite "
                f"ran {c['examples']} examples, `{c['summary']}` (exit {c['rc']}, {c['examples_per_s_wall']:.0f} "
                f"examples/s wall); with `LAPIS_EXAMPLE_BUG=sbo` it ended `{b['summary']}` (exit {b['rc']}), the "
                f"failing property `{b['failed'][0].split('::')[1]}`. The oracle answered {o['tma_load_per_s']:.0f} "
                f"TMA loads/s, {o['encode_per_s']:.0f} encodes/s and {o['wgmma_read_per_s']:.0f} wgmma reads/s; over "
                f"{o['loads']} loads its bytes and lapis's model differed {o['model_vs_gpu_mismatches']} times; a "
                f"misaligned load came back as `{o['misaligned_fault'].split('(')[0]}` (a value, not an exception) "
                f"and the next load succeeded on a fresh child: {o['load_after_fault_ok']}.")

    @staticmethod
    def reader_limits() -> str:
        from lapis.captures.safe import LIMITS

        md = ["| limit | value | what it caps |", "| --- | --- | --- |"]
        md += [f"| `{k}` | {_size(v)} | {LIMIT_MEANINGS.get(k, '-')} |" for k, v in LIMITS.items()]
        return "\n".join(md)

    @staticmethod
    def deprecated_options() -> str:
        from lapis.cli.parser import DEPRECATED_OPTIONS, DEPRECATED_VALUES

        pairs = [f"`{old}` is `{new}`" for old, new in DEPRECATED_OPTIONS.items()]
        pairs += [f"`{flag} {old}` is `{flag} {new}`" for flag, m in DEPRECATED_VALUES.items() for old, new in m.items()]
        return "Old spellings still work for one release, with a note on stderr: " + ", ".join(pairs) + "."

    @staticmethod
    def sweep_validated() -> str:
        return _sweep_validated()

    @staticmethod
    def gemm_table() -> str:
        return _gemm_table()

    @staticmethod
    def steps_table() -> str:
        return _steps_table()

    @staticmethod
    def race_steps_table() -> str:
        return _race_steps_table()

    @staticmethod
    def validation_headline() -> str:
        return _validation_headline()

    @staticmethod
    def ws_gemm_consumer() -> str:
        """examples/ws_gemm.py's consumer role, as it is in the file."""
        lines = (REPO / "examples" / "ws_gemm.py").read_text().splitlines()
        start = lines.index("def consumer(ctx, ring, role):")
        end = next(i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace())
        body = "\n".join(lines[start:end]).rstrip()
        return f"```python\n{body}\n```"


def value_region(spec: str) -> str:
    name = spec.removeprefix("python: docs_values.")
    fn = getattr(docs_values, name, None)
    if fn is None:
        raise SystemExit(f"docs/generate.py: no docs_values.{name} (markers: 'python: docs_values.NAME')")
    return fn().rstrip("\n") + "\n"


def render(spec: str) -> str:
    if spec.startswith("lapis "):
        return command_region(spec)
    if spec.startswith("python: docs_values."):
        return value_region(spec)
    raise SystemExit(f"docs/generate.py: a region is 'lapis ARGS [| FILTER]' or 'python: docs_values.NAME', got {spec!r}")


# ------------------------------------------------------------------------------------------------- driver --

def regenerate(text: str, memo: dict) -> str:
    def one(m: re.Match) -> str:
        spec = m["spec"]
        if spec not in memo:
            memo[spec] = render(spec)
        return m.group(1) + memo[spec] + m.group(4)

    return REGION.sub(one, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 listing the regions that differ")
    args = ap.parse_args(argv)
    global WRITE_CACHE
    WRITE_CACHE = not args.check
    STALE_CACHE.clear()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    memo: dict[str, str] = {}
    stale = []
    for page in pages():
        old = page.read_text()
        new = regenerate(old, memo)
        if new == old:
            continue
        rel = page.relative_to(REPO)
        if args.check:
            stale.append(rel)
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       f"{rel} (on the page)", f"{rel} (generated now)", n=1))
        else:
            page.write_text(new)
            print(f"rewrote {rel}")
    if stale:
        print(f"docs/generate.py --check: {len(stale)} page(s) disagree with the code: "
              f"{', '.join(map(str, stale))}; run `python docs/generate.py`")
    if STALE_CACHE:
        print(f"docs/generate.py --check: {len(STALE_CACHE)} cached value(s) were made from other inputs (the "
              f"prediction cache, the capture index or a profile changed): {', '.join(STALE_CACHE)}; run "
              f"`python docs/generate.py` (minutes: it simulates)")
    return 1 if stale or STALE_CACHE else 0


if __name__ == "__main__":
    sys.exit(main())
