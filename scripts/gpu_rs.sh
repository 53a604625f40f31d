#!/bin/bash
# The device call that measures the rescaled accumulator (explore_hopper token rs: one live fp32
# tile, so 128x256 tiles fit in registers) at the tile shapes it makes possible, 64-deep loads and
# c written with tl.store so that three or four stages fit in shared memory, beside the catalogue's
# structure (pre_ws_fma at 128x128) in the same run.
#   run: bash scripts/gpu_rs.sh   (carry .whl; results under $OUT)
set -u
. scripts/gpu_env.sh
cd scripts || exit 1
timeout 150 python3 explore_hopper.py --no-anchors --variants pre_ws_fma,pre_fma --configs 128x128x8x3 --out $OUT/rs-base.json > $OUT/rs-base.log 2>&1; echo "base rc $?"; tail -3 $OUT/rs-base.log
timeout 300 python3 explore_hopper.py --no-anchors --variants pre_ws_rs_k64_stc,pre_rs_k64_stc --configs 128x256x8x3,256x128x8x3,128x256x8x4 --deadline 240 --out $OUT/rs-wide.json > $OUT/rs-wide.log 2>&1; echo "wide rc $?"; grep -v "^ " $OUT/rs-wide.log | tail -12
timeout 150 python3 explore_hopper.py --no-anchors --variants pre_ws_rs_stc,pre_ws_rs_k64,pre_ws_rs_k64_stc_x2 --configs 128x256x8x2,128x128x8x3 --deadline 110 --out $OUT/rs-more.json > $OUT/rs-more.log 2>&1; echo "more rc $?"; grep -v "^ " $OUT/rs-more.log | tail -12
