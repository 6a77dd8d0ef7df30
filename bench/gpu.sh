#!/usr/bin/env bash
# The whole GPU measurement in one command (issue 12): run it on a CUDA machine from the
# repository root, after `bash bench/gpu_wheels.sh` has put the wheels it installs in .whl
# (the device tool's machines have no network: carry .whl).
#
#   bash bench/gpu.sh [sample|all|lm_eval|bf16|everything]    # default: everything
#
#   sample   ours vs minicons on 2,000 seeded BLiMP sentences, fp32 and bf16, word_l2r
#   all      all 134,000 BLiMP sentences through PLLScorer.score, bf16, SDPA then eager
#            attention, with the phase breakdown and the share of the run the GPU is busy
#   lm_eval  `lm_eval --model pll-mlm ... --tasks blimp_pll` end to end, wall time, and where it
#            goes (bench/lm_eval_phases.py, which runs lm-eval's command line in-process)
#   bf16     bf16 against fp32 on all BLiMP pairs with the packaged pll-demo (decision flips)
#
# Model: a random-weight bert-base architecture (bench/pll_bench.py --arch bert-base), or
# ../shared/models/bert-base-cased when present. Results (tables, JSON, logs) go to $OUT
# when set (the device tool's folder), else bench/results/gpu-<date>/.
#
# On a machine that already has both environments, PLL_PYTHON and MINICONS_PYTHON name
# their interpreters and nothing is installed; DEVICE=cpu N=50 makes a quick dry run.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP="${1:-everything}"
case $STEP in sample | all | lm_eval | bf16 | everything) ;; *)
    echo "usage: bash bench/gpu.sh [sample|all|lm_eval|bf16|everything]" >&2
    exit 2
    ;;
esac
RESULTS="${OUT:-bench/results/gpu-$(date -u +%F)}"
WHEELS="${WHEELS:-.whl}"
mkdir -p "$RESULTS"
export PLL_BENCH_CACHE="${PLL_BENCH_CACHE:-/tmp/pll-bench-cache}" PYTHONUNBUFFERED=1

DEVICE="${DEVICE:-cuda}"
N="${N:-2000}"

# Two environments on top of the machine's torch: ours (lm-eval, transformers 5) and
# minicons' (transformers<5).
if [[ -z ${PLL_PYTHON:-} ]]; then
    if [[ ! -x /tmp/pll-venv/bin/python ]]; then
        python3 -m venv --system-site-packages /tmp/pll-venv
        /tmp/pll-venv/bin/pip install -q --no-index --no-deps "$WHEELS"/pll/*.whl
        /tmp/pll-venv/bin/pip install -q --no-index --no-deps --no-build-isolation .
    fi
    PLL_PYTHON=/tmp/pll-venv/bin/python
fi
if [[ -z ${MINICONS_PYTHON:-} ]]; then
    if [[ ! -x /tmp/minicons-venv/bin/python ]]; then
        python3 -m venv --system-site-packages /tmp/minicons-venv
        /tmp/minicons-venv/bin/pip install -q --no-index --no-deps "$WHEELS"/minicons/*.whl
    fi
    MINICONS_PYTHON=/tmp/minicons-venv/bin/python
fi
PY=$PLL_PYTHON
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
    $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} | tee "$RESULTS/machine.txt"

if [[ $STEP == sample || $STEP == everything ]]; then
    $PY bench/pll_bench.py --device "$DEVICE" --n "$N" --metrics word_l2r \
        --dtypes float32 bfloat16 --profile-gpu --minicons-python "$MINICONS_PYTHON" \
        --minicons-batch 100 \
        --out-dir "$RESULTS" --tag sample 2>&1 | tee "$RESULTS/sample.log"
fi
if [[ $STEP == all || $STEP == everything ]]; then
    for attention in sdpa eager; do
        $PY bench/pll_bench.py --device "$DEVICE" --all --metrics word_l2r --dtypes bfloat16 \
            --profile-gpu --no-minicons --long-tokens 0 --attn-implementation "$attention" \
            --out-dir "$RESULTS" --tag "all-$attention" 2>&1 | tee "$RESULTS/all-$attention.log"
    done
fi
if [[ $STEP == lm_eval || $STEP == everything ]]; then
    model=$($PY -c "
import sys; sys.argv = ['x']; sys.path.insert(0, 'bench')
import pll_bench
print(pll_bench.resolve_model(pll_bench.parse_args([]))[0])")
    start=$(date +%s.%N)
    $PY bench/lm_eval_phases.py --phases-out "$RESULTS/lm_eval-phases.md" --model pll-mlm \
        --model_args "pretrained=$model,pll_metric=word_l2r,dtype=bfloat16" --tasks blimp_pll \
        --device "$DEVICE" --batch_size auto --output_path "$RESULTS/lm_eval" 2>&1 |
        tee "$RESULTS/lm_eval.log"
    end=$(date +%s.%N)
    $PY -c "print(f'lm_eval blimp_pll end to end: {$end - $start:.1f} s')" |
        tee -a "$RESULTS/lm_eval.log"
fi
if [[ $STEP == bf16 || $STEP == everything ]]; then
    $PY bench/bf16_vs_fp32.py --device "$DEVICE" --pairs-per-paradigm 1000 --out-dir "$RESULTS" \
        2>&1 | tee "$RESULTS/bf16.log"
fi
