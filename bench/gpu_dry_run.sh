#!/usr/bin/env bash
# A dry run of bench/gpu.sh on this machine's CPU, made the way the device tool runs it, so
# that the first run on a GPU does not fail on what a CPU can show: the repository as it
# travels (tracked and untracked-not-ignored files, plus the carried .whl; no ../shared),
# a stand-in for the device's python3, fresh environments and model cache for each call (the
# device's machines start bare), and $OUT checked against what the tool gives back.
#
#   bash bench/gpu_dry_run.sh [CALL ...]   # default: the plan's targets call (bench/README.md)
#   bash bench/gpu_dry_run.sh "sample all lm_eval" "tokenize bf16 attention"
#
# It always copies all of .whl, as a call with `sample` carries it: such a call runs with
# pll-demo's weights out (bash bench/demo_weights.sh out, then in), and so does this, or its
# size check fails; `bf16` and `tokenize` read those weights, so dry-run them with the
# weights in and expect only that size check to fail. The calls that carry .whl/pll alone
# (variants with PROFILE or BASELINE) need CUDA events and cannot be dry-run.
#
# Each CALL is the steps of one `bash bench/gpu.sh` call, run with small sizes (DEVICE=cpu
# N=50 ALL_N=200 LIMIT=2 PAIRS=2). The stand-in, a venv in $STANDIN (default
# /tmp/gpu-standin, made when missing), has the device image's packages that matter at its
# versions where PyPI has them for this python (the device's is 3.12; the wheels are fetched
# for the stand-in's). About 15 minutes on a 2-core machine; exits 1 on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
STANDIN="${STANDIN:-/tmp/gpu-standin}"
(($#)) || set -- "cuda_tests all sample lm_eval"
if [[ ! -x $STANDIN/bin/python3 ]]; then
    python3 -m venv "$STANDIN"
    # torch 2.13.0: the CPU wheel this machine has locally (the device has 2.11.0+cu130).
    "$STANDIN/bin/pip" install -q torch==2.13.0 transformers==5.17.0 tokenizers==0.23.2 \
        huggingface_hub==1.33.0 accelerate==1.15.0 safetensors==0.8.0 sentencepiece==0.2.2 \
        numpy pandas pyarrow pyyaml regex requests tqdm scikit-learn sacrebleu jinja2 psutil \
        click httpx hf-xet typer rich absl-py six joblib pillow setuptools pathspec pluggy \
        typing-extensions python-dateutil aiohttp xxhash fsspec filelock packaging peft pip
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
COPY="$WORK/repo"
mkdir -p "$COPY"
git ls-files -co --exclude-standard -z |
    while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
    tar -c --null -T - | tar -x -C "$COPY"
version=$("$STANDIN/bin/python3" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PYTHON_VERSION=$version bash bench/gpu_wheels.sh "$COPY/.whl" 2>&1 |
    { grep -v "is ignored" || true; } # this machine's pip configuration's noise
size=$(du -sb "$COPY" | cut -f1)
echo "what travels (tree and .whl): $((size / 2 ** 20)) MiB of 64"
failed=$((size > 64 * 2 ** 20))
((!failed)) || echo "over 64 MiB: keep pll-demo's weights out (bash bench/demo_weights.sh out;" \
    "bench/README.md, What travels)"

# check_out DIR: what the device tool gives back from $OUT.
check_out() {
    local files
    files=$(find "$1" -type f | wc -l)
    ((files <= 8)) || { echo "OUT: $files files, the tool returns 8" && return 1; }
    if find "$1" -mindepth 4 | grep -q . ||
        find "$1" -size +16M | grep -q . ||
        find "$1" -mindepth 1 -printf '%f\n' | grep -qv '^[A-Za-z0-9._-]*$'; then
        echo "OUT: too deep, too large or oddly named:" && find "$1" -ls && return 1
    fi
    ! grep -q "FAILED" "$1/summary.md" || { echo "a step failed" && return 1; }
}

for call in "$@"; do
    rm -rf "$WORK/envs" "$WORK/cache" "$WORK/out"
    mkdir -p "$WORK/envs"
    echo "=== bash bench/gpu.sh $call"
    begin=$SECONDS
    # shellcheck disable=SC2086  # a call is several steps
    if (cd "$COPY" && PATH="$STANDIN/bin:$PATH" OUT="$WORK/out" ENVS="$WORK/envs" \
        TMPDIR="$WORK" PLL_BENCH_CACHE="$WORK/cache" DEVICE=cpu N=50 ALL_N=200 LIMIT=2 PAIRS=2 \
        bash bench/gpu.sh $call >"$WORK/log" 2>&1) && check_out "$WORK/out"; then
        echo "ok, $((SECONDS - begin)) s"
    else
        failed=1
        tail -n 30 "$WORK/log"
    fi
    grep -h "^## \|ready in" "$WORK/out/summary.md" || true
    ls -l "$WORK/out" || true
done
exit "$failed"
