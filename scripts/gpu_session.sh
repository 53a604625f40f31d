#!/usr/bin/env bash
# One device call, the whole H200 proof: a campaign slice on the local backend (new, or resumed
# from a carried blackboard), then the benchmark table (harness protocol and do_bench) with the
# best kernel of every blackboard given. With two or more GPUs the attack suite runs at the same
# time on the last GPU and the campaign on the others (ATTACKS=0 skips it and gives the campaign
# every GPU).
#   bash scripts/gpu_session.sh OUT_DIR CAMPAIGN_SECONDS NEW|BLACKBOARD_TO_RESUME [MORE_BLACKBOARDS_TO_BENCH...]
# Carries its pure-Python dependencies as wheels in .whl/ (see README, "Real hardware"). BENCH_ARGS adds
# options to the benchmark (e.g. "--eval-py .gpu/eval.py --skip reference,scaled_mm").
set -u
out=${1:?out dir}; seconds=${2:?campaign seconds}; start=${3:?NEW or a blackboard to resume}; shift 3
mkdir -p "$out"
. scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
gpus=$(nvidia-smi -L | grep -c '^GPU ')
attacks=$([ "${ATTACKS:-1}" = 1 ] && [ "$gpus" -gt 1 ] && echo 1 || echo 0)
campaign_gpus=$(seq -s, 0 $((gpus - 1 - attacks)))
if [ "$attacks" = 1 ]; then
  (CUDA_VISIBLE_DEVICES=$((gpus - 1)) python3 scripts/gpu_attacks.py --out "$out/attacks.json" --timeout 30 \
     > "$out/attacks.log" 2>&1; echo "attack suite rc=$?" >> "$out/attacks.log") &
fi
db="$out/h200.sqlite"
ks() { CUDA_VISIBLE_DEVICES=$campaign_gpus timeout -s KILL "$seconds" python3 -P -m kernel_scientist "$@"; }
if [ "$start" = NEW ]; then
  ks run scenarios/amd_fp8_mm_h200.toml --db "$db" --quiet --set "evaluator.in_flight=$((gpus - attacks))"
else
  cp "$start" "$db"; [ -f "${start%.sqlite}.jsonl" ] && cp "${start%.sqlite}.jsonl" "${db%.sqlite}.jsonl"
  ks resume --db "$db" --quiet --set "evaluator.in_flight=$((gpus - attacks))"
fi
echo "campaign slice rc=$? (137: stopped by its time limit, as planned)"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$db"
python3 -P -m kernel_scientist status --db "$db" | head -16
python3 -P -m kernel_scientist export --db "$db" --out "$out/best_kernel.py"
benched=(--db "$db"); for extra in "$@"; do benched+=(--db "$extra"); done
CUDA_VISIBLE_DEVICES=0 python3 scripts/bench_leaderboard.py "${benched[@]}" --out "$out/bench.json" --budget 0.4 \
  --max-calls 30 --do-bench ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | tail -24
wait
tail -4 "$out/attacks.log" 2>/dev/null
