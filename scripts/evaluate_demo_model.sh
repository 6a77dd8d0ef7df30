#!/usr/bin/env bash
# BLiMP (by phenomenon) and EventsAdapt results of the packaged demo model for all four PLL
# metrics, through our own lm-eval tasks, and the leaderboard table quoted in README.md.
#   bash scripts/evaluate_demo_model.sh [LIMIT]   # pairs per paradigm; default 100, "all" = 1000
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-100}
limit_args=()
[ "$limit" = all ] || limit_args=(--limit "$limit")
out=results/pll-demo
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
for metric in original word_l2r whole_word sentence_l2r; do
    lm_eval --model pll-mlm --model_args "pretrained=pll-demo,pll_metric=$metric" \
        --tasks blimp_pll,eventsadapt_pll --device cpu --batch_size auto \
        "${limit_args[@]}" --output_path "$out/$metric"
done
pll-harness compare "$out" -o "$out"
