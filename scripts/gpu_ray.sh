#!/usr/bin/env bash
# One device call, the Ray backend on this machine's GPU(s) against the local backend:
#  1. a Ray head started here (every GPU a Ray resource), then a campaign slice with
#     evaluator.backend = "ray" joining it;
#  2. the same slice with the local backend;
#  3. the same kernels (the seed, then the Ray slice's kernels) evaluated on both backends in turn
#     (scripts/ray_compare.py): verdicts, timings, and the Ray overhead per evaluation.
#   bash scripts/gpu_ray.sh OUT_DIR SLICE_SECONDS [KERNELS]
# Ray and the project's pure-Python dependencies travel as wheels in .whlray/ (docs/ray.md says
# how to make it); they are installed into /tmp/site, which the Ray workers see too.
set -u
out=${1:?out dir}; seconds=${2:?seconds per campaign slice}; kernels=${3:-3}
mkdir -p "$out"
[ -d .whlray ] || { echo "gpu_ray: no .whlray/ folder to install Ray from (docs/ray.md)"; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whlray/*.whl || exit 1
# The Ray workers inherit this environment from `ray start`: they import Ray and this repository.
# Token authentication on, as docs/ray.md advises (Ray 2.59+ turns it on by itself only in some cases,
# and a head and a client that disagree cannot talk).
python3 scripts/installed_layout.py /tmp/ks-layout > /dev/null || exit 1  # kernel_scientist.agents is agents/, ...
export PYTHONPATH=/tmp/site:/tmp/ks-layout PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token
ray() { python3 -m ray.scripts.scripts "$@"; }
ray get-auth-token --generate > /dev/null 2>&1 || { echo "gpu_ray: ray get-auth-token failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
gpus=$(nvidia-smi -L | grep -c '^GPU ')
began=$SECONDS
ray start --head --num-gpus="$gpus" --include-dashboard=false --object-store-memory=2000000000 \
  --disable-usage-stats > "$out/ray-start.log" 2>&1 || { tail -20 "$out/ray-start.log"; exit 1; }
echo "ray start: $((SECONDS - began)) s"
ray status 2>&1 | tee "$out/ray-status.txt" | grep -E "GPU|CPU|node_" | head -8
slice() {  # a campaign slice: Ctrl-C at its time limit (the campaign stops cleanly)
  local db=$1; shift
  timeout -s INT -k 60 "$seconds" python3 -P -m kernel_scientist run scenarios/amd_fp8_mm_h200.toml \
    --db "$db" --quiet --set "evaluator.in_flight=$gpus" "$@" > "${db%.sqlite}.out" 2>&1
  echo "slice $(basename "$db"): rc=$? (124: stopped by Ctrl-C at its time limit, as planned)"
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$db"
  python3 -P -m kernel_scientist logs --db "$db" --agent evaluator --kind evaluation | tail -12
}
slice "$out/ray.sqlite" --set evaluator.backend=ray --set evaluator.ray_address=auto
slice "$out/local.sqlite" --set evaluator.backend=local
python3 scripts/ray_compare.py --address auto --db "$out/ray.sqlite" --kernels "$kernels" \
  --out "$out/compare.json" > "$out/compare.log" 2>&1
echo "ray_compare rc=$? (1: a verdict differed)"; grep -v WARNING "$out/compare.log" | tail -30
ray stop > /dev/null 2>&1
tail -c 200000 /tmp/ray/session_latest/logs/raylet.out > "$out/raylet.out" 2>/dev/null
