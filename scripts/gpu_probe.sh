#!/bin/bash
# One device call: evaluations per GPU-hour and their phases (scripts/probe_eval.py) under the
# harness's default stop rule and a looser one, cold and with the spare process; then Nsight
# Compute on the GEMM of a campaign kernel (scripts/ncu_kernel.py). Results under $OUT.
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_env.sh
R=$PWD
K15=$R/docs/h200/campaign-d-best.py.txt
K15R=$R/docs/h200/campaign-d-k15-replay.py.txt
cd /tmp || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
python3 "$R/scripts/probe_eval.py" "$K15" "$K15R" --rounds 1 --out "$OUT/probe-default.json" 2>&1 | tee "$OUT/probe-default.log"
python3 "$R/scripts/probe_eval.py" "$K15" "$K15R" --rounds 1 --modes spare --min-calls 5 --rel-stderr 0.005 \
  --out "$OUT/probe-loose.json" 2>&1 | tee "$OUT/probe-loose.log"
for shape in 1024x1536x7168 6144x4608x7168; do
  timeout 240 ncu --profile-from-start off --clock-control none --kernel-name regex:gemm \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    python3 "$R/scripts/ncu_kernel.py" "$K15" --shape $shape > "$OUT/ncu-k15-$shape.txt" 2>&1
  echo "ncu $shape: rc $?"; tail -5 "$OUT/ncu-k15-$shape.txt"
done
