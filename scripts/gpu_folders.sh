#!/usr/bin/env bash
# One device call: issue 11 on a GPU. Every solution shipped with the test folders and (when given)
# the public GPU MODE folders through the local backend, the original fp8-mm folder with the seed
# kernel, and a short campaign on the non-GEMM stencil folder with the offline brain.
#   bash scripts/gpu_folders.sh OUT_DIR [REFERENCE_KERNELS_CHECKOUT|""] [CAMPAIGN_SECONDS|0] [skip-tests]
# REFERENCE_KERNELS_CHECKOUT: a copy of github.com/gpu-mode/reference-kernels (its problems/ folder);
# "" skips the public folders. CAMPAIGN_SECONDS 0 skips the campaign. A device call is at most
# 10 minutes: run the folders and the campaign as two calls, e.g.
#   bash scripts/gpu_folders.sh $OUT/a /path/to/reference-kernels 0
#   bash scripts/gpu_folders.sh $OUT/b "" 420 skip-tests
# Carries its pure-Python dependencies as wheels in .whl/, as scripts/gpu_session.sh does.
set -u
out=${1:?out dir}; rk=${2:-}; seconds=${3:-360}; skip=${4:-}
mkdir -p "$out"
. scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$out/gpu.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" | tee "$out/versions.txt"
check() { python3 scripts/check_folders.py "$@" --max-calls 20 --shape-budget 1.0 --timeout 300; }
[ "$skip" = skip-tests ] || echo "== our test folders"; [ "$skip" = skip-tests ] || check tests/problems/vecadd tests/problems/rowstats tests/problems/stencil \
  --json "$out/folders-tests.json" 2>&1 | tee "$out/folders-tests.log"
if [ -n "$rk" ]; then
  echo "== public pmpp folders"; check "$rk"/problems/pmpp/*_py --json "$out/folders-pmpp.json" 2>&1 | tee "$out/folders-pmpp.log"
  echo "== public amd fp8-mm with the seed kernel (e4m3fnuz inputs on NVIDIA)"
  python3 -P -m kernel_scientist evaluate evaluator/tasks/amd_fp8_mm/submission.py --task "$rk/problems/amd/fp8-mm" \
    --backend local --json > "$out/fp8-public-seed.json" 2> "$out/fp8-public-seed.err"
  echo "rc=$?"; python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['outcome'], r['score_us'], r['reason'][:300])" "$out/fp8-public-seed.json"
fi
[ "$seconds" = 0 ] && exit 0
echo "== stencil campaign, offline brain, ${seconds} s"
timeout -s KILL "$seconds" python3 -P -m kernel_scientist run scenarios/stencil_h200.toml --db "$out/stencil.sqlite" --quiet
echo "campaign rc=$? (137: stopped by its time limit)"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$out/stencil.sqlite"
python3 -P -m kernel_scientist status --db "$out/stencil.sqlite" | head -24 | tee "$out/stencil-status.txt"
