#!/usr/bin/env bash
# One device call: a campaign slice on the local backend (new, or resumed from a carried
# blackboard), then the benchmark table with the campaign's best kernel.
#   bash scripts/gpu_session.sh OUT_DIR CAMPAIGN_SECONDS [BLACKBOARD_TO_RESUME]
# Carries its pure-Python dependencies as wheels in .whl/ (see README, "Real hardware").
set -u
out=${1:?out dir}; seconds=${2:-300}; resume=${3:-}
mkdir -p "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
ks() { python3 -m kernel_scientist.cli "$@"; }
if [ -z "$resume" ]; then
  ks evaluate evaluator/tasks/amd_fp8_mm/submission.py --backend local > "$out/seed_eval.txt"; rc=$?
  head -8 "$out/seed_eval.txt"; [ $rc -eq 0 ] || exit 1
  python3 -c "
from evaluator import LocalBackend, load_task
r = LocalBackend(load_task('evaluator/tasks/amd_fp8_mm')).reference_report()
print('reference:', r.outcome, r.reason, r.score_us)"
  timeout -s KILL "$seconds" python3 -m kernel_scientist.cli run scenarios/amd_fp8_mm_h200.toml --db "$out/h200.sqlite" --quiet
else
  cp "$resume" "$out/h200.sqlite"
  timeout -s KILL "$seconds" python3 -m kernel_scientist.cli resume --db "$out/h200.sqlite" --quiet
fi
echo "campaign rc=$?"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$out/h200.sqlite"
ks status --db "$out/h200.sqlite" | head -30
ks export --db "$out/h200.sqlite" --out "$out/best_kernel.py"
python3 scripts/bench_gpu.py --db "$out/h200.sqlite" --out "$out/bench.json" --budget 1.0 2>&1 | tail -24
