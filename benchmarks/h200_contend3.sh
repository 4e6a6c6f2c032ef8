#!/usr/bin/env bash
# The three-warpgroup contend microbenchmark (kernels/micro_mix_softmax_v4.cu, campaign version 6: a softmax tile
# beside another warpgroup's softmax and a third's wgmma): benchmarks/h200_micro.sh contend3 (its header says how to
# make contend3-provenance.json). Commit $OUT/cap/micro as lapis/data/captures/micro/<gpu>-<date>-contend3/micro/.
exec bash "$(dirname "$0")/h200_micro.sh" contend3
