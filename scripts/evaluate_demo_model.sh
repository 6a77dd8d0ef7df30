#!/usr/bin/env bash
# BLiMP (by phenomenon) and EventsAdapt results of the packaged demo model for all four PLL
# metrics, through our own lm-eval tasks, and the leaderboard table that the model card
# (pll_harness/models/pll-demo/README.md) quotes.
#   bash scripts/evaluate_demo_model.sh [LIMIT [OUT]]
#   LIMIT  pairs per paradigm; default 100, "all" = 1000
#   OUT    where results and leaderboard go; default results/pll-demo (the committed ones)
# Each metric's earlier results in OUT are replaced: lm-eval adds a file per run, and the
# leaderboard would list runs of other limits beside this one.
# lm-eval records each task's YAML by its absolute path (config_source); the files keep
# it from pll_harness/ on, so that committed results name no machine's folders.
set -euo pipefail
case ${1:-} in -h | --help)
    sed -n '2,11p' "$0"
    exit 0
    ;;
esac
out=${2:+$(realpath -m "$2")}
cd "$(dirname "$0")/.."
limit=${1:-100}
out=${out:-results/pll-demo}
limit_args=()
[ "$limit" = all ] || limit_args=(--limit "$limit")
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Every metric of the registry (pll_harness/metrics.py), which numpy alone can import.
metrics=$(python -c 'from pll_harness.metrics import PLL_METRICS; print(*PLL_METRICS)')
for metric in $metrics; do
    rm -rf "${out:?}/$metric"
    lm_eval --model pll-mlm --model_args "pretrained=pll-demo,pll_metric=$metric" \
        --tasks blimp_pll,eventsadapt_pll --device cpu --batch_size auto \
        "${limit_args[@]}" --output_path "$out/$metric"
    find "$out/$metric" -name 'results_*.json' -exec \
        sed -i -E 's#"/[^"]*/(pll_harness/tasks/)#"\1#g' {} +
done
pll-harness compare "$out" -o "$out"
