"""Provenance of a capture: the git commit and the blob of every source used.

The GPU machine gets no git history, so this runs where git is and the result
travels with the capture command (`--provenance FILE`). tests/test_tma_placement.py
checks that every blob a manifest names exists in the history (stale captures fail).
"""

from __future__ import annotations

import json
import subprocess
import sys

CAPTURE_SOURCES = (
    "lapis/gpu/kernels/tma_capture_v1.cu",
    "lapis/gpu/capture_tma.py",
    "lapis/gpu/tma_campaign.py",
    "lapis/gpu/encode_campaign.py",
    "lapis/gpu/isolate.py",
    "lapis/gpu/kernels/wgmma_capture_v1.cu",
    "lapis/gpu/gen_wgmma_kernel.py",
    "lapis/gpu/wgmma_campaign.py",
    "lapis/gpu/capture_wgmma.py",
    "lapis/gpu/kernels/cutlass_desc_oracle_v1.cu",
    "lapis/gpu/kernels/cutlass_desc_oracle_v1.json",
    "lapis/gpu/gen_cutlass_oracle.py",
    "lapis/gpu/capture_cutlass_oracle.py",
    "lapis/gpu/kernels/cutlass_desc_oracle_v2.cu",
    "lapis/gpu/kernels/cutlass_desc_oracle_v2.json",
    "lapis/gpu/kernels/bank_capture_v1.cu",
    "lapis/gpu/kernels/bank_capture_v2.cu",
    "lapis/gpu/bank_campaign.py",
    "lapis/gpu/capture_bank.py",
    "lapis/gpu/kernels/micro_common.cuh",
    "lapis/gpu/kernels/micro_core.cu",
    "lapis/gpu/kernels/micro_tma.cu",
    "lapis/gpu/kernels/micro_wgmma.cu",
    "lapis/gpu/kernels/micro_tma_v2.cu",
    "lapis/gpu/kernels/micro_mix_v1.cu",
    "lapis/gpu/gen_micro_wgmma.py",
    "lapis/model/micro_campaign.py",
    "lapis/gpu/capture_micro.py",
    # campaign v3 (softmax, mix, contend, launch) and the kernel headers they include
    "lapis/gpu/kernels/micro_softmax_v1.cu",
    "lapis/gpu/kernels/micro_mix_softmax_v1.cu",
    "lapis/gpu/kernels/micro_mix_softmax_v2.cu",
    "lapis/gpu/kernels/micro_mix_softmax_v3.cu",
    "lapis/gpu/kernels/micro_launch_v1.cu",
    "lapis/gpu/kernels/attention_softmax.cuh",
    "lapis/gpu/kernels/attention_plan.h",
    "lapis/gpu/kernels/sm90.cuh",
    "lapis/gpu/kernels/wgmma_bf16_rs.cuh",
    "lapis/gpu/kernels/wgmma_bf16_ss.cuh",
)


def _git(*args, cwd=None) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=cwd).stdout.strip()


def git_provenance(paths=CAPTURE_SOURCES, cwd=None) -> dict:
    """commit, dirty flag (any of `paths` differs from HEAD) and each path's blob SHA."""
    blobs = {p: _git("hash-object", p, cwd=cwd) for p in paths}
    dirty = bool(_git("status", "--porcelain", "--", *paths, cwd=cwd))
    return dict(commit=_git("rev-parse", "HEAD", cwd=cwd), dirty=dirty, source_blobs=blobs)


def blob_in_history(sha: str, cwd=None) -> bool:
    """True if git knows the blob (it was committed at some point)."""
    r = subprocess.run(["git", "cat-file", "-e", f"{sha}^{{blob}}"], capture_output=True, cwd=cwd)
    return r.returncode == 0


def commits_with(blobs: dict, cwd=None) -> list[str]:
    """The commits (oldest first) whose tree holds every path of `blobs` ({path: blob SHA}) at that blob: where
    the sources a capture recorded were committed, when the capture's own commit field is not that commit."""
    out = []
    for commit in _git("rev-list", "--reverse", "HEAD", cwd=cwd).split():
        tree = _git("ls-tree", "-r", commit, "--", *blobs, cwd=cwd)
        have = {line.split("\t", 1)[1]: line.split()[2] for line in tree.splitlines()}
        if all(have.get(path) == sha for path, sha in blobs.items()):
            out.append(commit)
    return out


def match_capture(folder: str, file: str = "manifest.json") -> dict:
    """`python -m lapis.captures.provenance --match FOLDER [FILE]`: the commits holding every source blob FOLDER/FILE's
    provenance recorded, beside the commit and dirty flag it recorded (written beside the capture as
    provenance-commit.json; the capture itself is never edited)."""
    from pathlib import Path
    prov = json.loads((Path(folder) / file).read_text())["provenance"]
    found = commits_with(prov["source_blobs"])
    return dict(capture=str(folder), file=file, recorded_commit=prov.get("commit"), recorded_dirty=prov.get("dirty"),
                commits_holding_every_source_blob=found, first=found[0] if found else None,
                how="lapis.captures.provenance.commits_with: git ls-tree of every commit against the recorded source_blobs")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--match"]:
        json.dump(match_capture(*sys.argv[2:4]), sys.stdout, indent=1)
    else:
        json.dump(git_provenance(sys.argv[1:] or CAPTURE_SOURCES), sys.stdout, indent=1)
