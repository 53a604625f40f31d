#!/bin/bash
# The device call that measures the warp-specialised Gluon GEMM (scripts/gluon_ws_gemm.py) against
# the Triton baseline in one run: Triton's warp_specialize signature, ptxas's verdict, a two-shape
# smoke (a barrier mistake hangs: the timeout ends it), then explore_hopper on the 18 ranked shapes.
#   run: bash scripts/gpu_glw.sh   (carry .whl; results under $OUT)
set -u
. scripts/gpu_env.sh
cd scripts || exit 1
python3 -c "import triton, inspect; from triton.experimental.gluon import language as gl; print(triton.__version__, inspect.signature(gl.warp_specialize))"
timeout 60 python3 gluon_ws_gemm.py --ptxas > $OUT/glw-ptxas.txt 2>&1; echo "ptxas rc $?"; tail -5 $OUT/glw-ptxas.txt
timeout 90 python3 explore_hopper.py --no-anchors --only 1024x1536x7168,6144x4608x7168 --variants glw,glw_ns --configs 128x128x8x3 --out $OUT/glw-smoke.json > $OUT/glw-smoke.log 2>&1; echo "smoke rc $?"; tail -20 $OUT/glw-smoke.log
timeout 400 python3 explore_hopper.py --variants pre_ws,glw,glw_ns,glw_r224 --configs 128x128x8x3,128x64x8x4 --deadline 330 --out $OUT/explore-hopper-10.json > $OUT/explore-hopper-10.log 2>&1; echo "explore rc $?"; tail -40 $OUT/explore-hopper-10.log
