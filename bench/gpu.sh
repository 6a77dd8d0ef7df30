#!/usr/bin/env bash
# The whole GPU measurement (issue 12): run it on a CUDA machine from the repository root,
# after `bash bench/gpu_wheels.sh` has put the wheels it installs in .whl (the device tool's
# machines have no network: carry .whl). bench/README.md gives the device calls to make.
#
#   bash bench/gpu.sh [STEP ...]      # STEP: sample, all, variants, lm_eval, bf16, attention,
#                                     # kernel, fusion, tokenize, cuda_tests or everything
#                                     # (default: all ten)
#
#   sample   ours vs minicons on 2,000 seeded BLiMP sentences, fp32 and bf16, word_l2r
#   all      all 134,000 BLiMP sentences through PLLScorer.score, bf16, the loader's default
#            attention (SDPA with the short-sequence kernel, pll_harness/short_attention.py)
#            then plain SDPA, with the phase breakdown and the share of the run the GPU is busy;
#            the default's score() twice in one process (first-call costs), with each batch's
#            host and GPU times
#   variants all of BLiMP's score() in one process under settings of the host's threads
#            (switch interval, garbage collector, parts prepared in line), each with the GPU's
#            timeline (bench/score_variants.py); with BASELINE, a folder holding another
#            revision's package (`mkdir -p .baseline && git archive REV pll_harness | tar -x
#            -C .baseline`, carried), that engine's default first, then ours, the default
#            alone for each; with RESERVE=1, ours again in a process that first holds and
#            frees a full batch's activations (the allocator's growth in a first call), and
#            in one that first holds and frees a pinned host block of each power of two (the
#            host allocator's); with EAGER=1, ours again with CUDA_MODULE_LOADING=EAGER (every
#            kernel's module loaded at start-up rather than at its first launch); with
#            WARM=S, ours again after S seconds of tiny kernels launched one after another;
#            with PROFILE=1, ours again with each call under torch's CPU profiler
#            (--host-profile: the launching thread's ops, a first call's against the last's)
#   lm_eval  `lm_eval --model pll-mlm ... --tasks blimp_pll` end to end, wall time, and where it
#            goes (bench/lm_eval_phases.py, which runs lm-eval's command line in-process);
#            twice, the first on a fresh machine paying cold caches, the second as a user's
#            next run would, with each import's time by package (bench/import_times.py)
#   bf16     bf16 against fp32 on all BLiMP pairs with the packaged pll-demo (decision flips)
#   attention  all of BLiMP through the runner with each SDPA kernel alone, the runner's own
#            choice and eager attention, twice each (bench/attention_gpu.py)
#   kernel   the short-sequence attention kernel against SDPA's kernels, one layer at the
#            shapes of BLiMP's batches (bench/short_attention_gpu.py)
#   fusion   a bert-base layer after its attention at the shapes of BLiMP's batches: as
#            transformers runs it, compiled by torch.compile (its element-wise passes
#            fused), and its matrix products alone (bench/fusion_gpu.py)
#   tokenize the tokenize step over all of BLiMP with TOKENIZERS_PARALLELISM unset, false and
#            true, each in a fresh process (bench/tokenize_threads.py)
#   cuda_tests  the tests that need CUDA (skipped elsewhere): the runner's CUDA paths (parts
#            launched back to back, results copied back into pinned memory, more targets than
#            a grid dimension) and the short-sequence attention kernel, against runs on the
#            same GPU
#
# A step that fails does not stop the next ones; the exit status is 1 if any failed. All
# steps together stop after BUDGET_S seconds (default 540, inside the device tool's 10
# minutes), and what was measured by then is kept.
#
# Model: a random-weight bert-base architecture (bench/pll_bench.py --arch bert-base), or
# ../shared/models/bert-base-cased when present. Results (tables, JSON, logs) go to
# bench/results/gpu-<date>/; when $OUT is set (the device tool's folder, which returns at
# most 8 files) they go into $OUT/gpu-results.tar.gz instead, rewritten after each step,
# with $OUT/summary.md (machine, install time, each step's status and tables) beside it.
#
# The environments are made in $ENVS (default /tmp) unless PLL_PYTHON and MINICONS_PYTHON
# name interpreters that already have what they need. Smaller runs, for a dry run on a CPU
# (bench/gpu_dry_run.sh): DEVICE=cpu, N (sample size), ALL_N (a sample of that many
# sentences instead of all of BLiMP), PAIRS (bf16 pairs per paradigm, default 1000) and
# LIMIT (lm-eval's --limit, documents per task).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=("${@:-everything}")
for step in "${STEPS[@]}"; do
    case $step in
    sample | all | variants | lm_eval | bf16 | attention | kernel | fusion | tokenize) ;;
    cuda_tests) ;;
    everything)
        STEPS=(sample all variants lm_eval bf16 attention kernel fusion tokenize cuda_tests)
        ;;
    *)
        echo "usage: bash bench/gpu.sh [sample|all|variants|lm_eval|bf16|attention|kernel" \
            "|fusion|tokenize|cuda_tests|everything ...]" >&2
        exit 2
        ;;
    esac
done
DEADLINE=$((SECONDS + ${BUDGET_S:-540}))
WHEELS="${WHEELS:-.whl}"
ENVS="${ENVS:-/tmp}"
DEVICE="${DEVICE:-cuda}"
N="${N:-2000}"
PAIRS="${PAIRS:-1000}"
export PLL_BENCH_CACHE="${PLL_BENCH_CACHE:-/tmp/pll-bench-cache}" PYTHONUNBUFFERED=1
# The device has no network: never wait for the Hub.
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" HF_DATASETS_OFFLINE="${HF_DATASETS_OFFLINE:-1}"
if [[ -n ${OUT:-} ]]; then
    RESULTS="$(mktemp -d)/gpu-$(date -u +%F)"
else
    RESULTS="bench/results/gpu-$(date -u +%F)"
fi
mkdir -p "$RESULTS"
SUMMARY="$RESULTS/summary.md"
echo "# bench/gpu.sh ${STEPS[*]}" >"$SUMMARY"

# Writes what is there so far into $OUT: one archive and the summary (the device tool
# returns at most 8 files, none deeper than two folders).
pack() {
    [[ -n ${OUT:-} ]] || return 0
    mkdir -p "$OUT"
    tar -czf "$OUT/gpu-results.tar.gz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
    cp "$SUMMARY" "$OUT/summary.md"
}
trap pack EXIT

# make_env VENV WHEEL...: a venv with the wheels, and after them the packages of the
# machine's python3 (torch). Not `venv --system-site-packages`: the device's python3 is
# itself a venv, and a venv made from one sees its base python's packages, not the venv's.
make_env() {
    local venv=$1 machine_sites own_site
    shift
    rm -rf "$venv" &&
        python3 -m venv --without-pip "$venv" &&
        machine_sites=$(python3 -c 'import site; print(site.getsitepackages())') &&
        own_site=$("$venv/bin/python" -c \
            'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
        echo "import site; list(map(site.addsitedir, $machine_sites))" \
            >"$own_site/zz_machine.pth" &&
        "$venv/bin/python" -m pip install -q --no-index --no-deps --ignore-installed "$@"
}

# Both environments, unless PLL_PYTHON and MINICONS_PYTHON name them. It runs as an `if`
# condition, where set -e does not act, so each step is chained: a failed one must not
# mark its environment ready.
install() {
    if [[ -z ${PLL_PYTHON:-} || -z ${MINICONS_PYTHON:-} ]] &&
        ! compgen -G "$WHEELS/pll/*.whl" >/dev/null; then
        echo "no wheels in $WHEELS/pll: run bash bench/gpu_wheels.sh (with PyPI), carry .whl"
        return 1
    fi
    if [[ -z ${PLL_PYTHON:-} && ! -f $ENVS/pll-venv/ready ]]; then
        make_env "$ENVS/pll-venv" "$WHEELS"/pll/*.whl &&
            "$ENVS/pll-venv/bin/python" -m pip install -q --no-index --no-deps \
                --no-build-isolation . &&
            touch "$ENVS/pll-venv/ready" || return 1
    fi
    if [[ -z ${MINICONS_PYTHON:-} && ! -f $ENVS/minicons-venv/ready ]]; then
        make_env "$ENVS/minicons-venv" "$WHEELS"/minicons/*.whl &&
            touch "$ENVS/minicons-venv/ready" || return 1
    fi
}

start=$SECONDS
if ! install 2>&1 | tee "$RESULTS/install.log"; then
    {
        echo "## install: FAILED"
        echo
        tail -n 20 "$RESULTS/install.log"
    } >>"$SUMMARY"
    exit 1
fi
PY=${PLL_PYTHON:-$ENVS/pll-venv/bin/python}
MINICONS_PYTHON=${MINICONS_PYTHON:-$ENVS/minicons-venv/bin/python}
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null ||
        echo "no nvidia-smi"
    "$PY" -c "import importlib.metadata as m
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return 'MISSING'
names = 'torch transformers tokenizers huggingface_hub lm_eval datasets pyarrow fsspec'
print(*(f'{p} {version(p)}' for p in names.split()))
import torch
print('CUDA available:', torch.cuda.is_available())" || echo "the environment's python failed"
    echo "environments ready in $((SECONDS - start)) s"
} 2>&1 | tee "$RESULTS/machine.txt"
{
    echo '```'
    cat "$RESULTS/machine.txt"
    echo '```'
} >>"$SUMMARY"

# run LOG COMMAND...: the command under what is left of the budget, its output to the
# screen and to $RESULTS/LOG.
run() {
    local log=$1 left=$((DEADLINE - SECONDS))
    shift
    ((left > 0)) || { echo "no time left for $log" | tee -a "$RESULTS/$log" && return 1; }
    timeout --kill-after=10 "$left" "$@" 2>&1 | tee -a "$RESULTS/$log" || {
        local status=$?
        ((status != 124 && status != 137)) ||
            echo "stopped: BUDGET_S ran out" | tee -a "$RESULTS/$log"
        return "$status"
    }
}

sample() {
    run sample.log "$PY" bench/pll_bench.py --device "$DEVICE" --n "$N" --metrics word_l2r \
        --dtypes float32 bfloat16 --profile-gpu --minicons-python "$MINICONS_PYTHON" \
        --minicons-batch 100 --out-dir "$RESULTS" --tag sample
}

all() {
    local size=(--all) attention named failed=0
    [[ -z ${ALL_N:-} ]] || size=(--n "$ALL_N")
    for attention in default sdpa; do
        named=(--again 1) # the default's first call against its second, in one process
        [[ $attention == default ]] || named=(--attn-implementation "$attention")
        run "all-$attention.log" "$PY" bench/pll_bench.py --device "$DEVICE" "${size[@]}" \
            --metrics word_l2r --dtypes bfloat16 --profile-gpu --no-minicons --long-tokens 0 \
            "${named[@]}" --out-dir "$RESULTS" --tag "all-$attention" || failed=1
    done
    return "$failed"
}

lm_eval() {
    local model limit=() begin call timing
    # The last line: building the model on a bare machine, the tokenizer's trainer prints
    # blank lines to stdout from Rust first.
    model=$("$PY" -c "
import sys; sys.path.insert(0, 'bench')
import pll_bench
print(pll_bench.resolve_model(pll_bench.parse_args([]))[0])" | tail -n 1) || return 1
    [[ -z ${LIMIT:-} ]] || limit=(--limit "$LIMIT")
    # Imports took 13-15 s on the H100 in every run, 4-5 s on the 2-core VM. Two candidates:
    # file-system calls (lm-eval's index makes 341,490 lstat calls a run; 0.11-0.21 s for
    # these on the VM) and bytecode the interpreter cannot cache (then every run compiles).
    # The second run's import times tell a few slow libraries from many slow modules.
    "$PY" -c 'import importlib.util, os, sys, time
t = time.perf_counter()
for _ in range(100_000): os.lstat(".")
spent = time.perf_counter() - t
cached = os.path.exists(importlib.util.cache_from_source(importlib.util.find_spec("transformers").origin))
print(f"this machine: 100,000 lstat calls in {spent:.2f} s; writes bytecode: "
      f"{not sys.dont_write_bytecode}; transformers bytecode cached: {cached}")' |
        tee -a "$RESULTS/lm_eval.log"
    # The second run also writes each import's time (-X importtime: one line an import, a
    # few milliseconds in all), so that the first stays comparable with earlier sessions'.
    for call in 1 2; do
        begin=$SECONDS
        timing=()
        ((call == 1)) || timing=(env PYTHONPROFILEIMPORTTIME=1) # any value turns it on
        run "lm_eval-$call.log" "${timing[@]}" "$PY" bench/lm_eval_phases.py \
            --phases-out "$RESULTS/lm_eval-phases-$call.md" \
            --model pll-mlm --model_args "pretrained=$model,pll_metric=word_l2r,dtype=bfloat16" \
            --tasks blimp_pll --device "$DEVICE" --batch_size auto "${limit[@]}" \
            --output_path "$RESULTS/lm_eval" || return 1
        echo "lm_eval blimp_pll end to end, run $call on this machine: $((SECONDS - begin)) s" |
            tee -a "$RESULTS/lm_eval.log"
    done
    "$PY" bench/import_times.py "$RESULTS/lm_eval-2.log" --out "$RESULTS/lm_eval-imports.md"
}

bf16() {
    run bf16.log "$PY" bench/bf16_vs_fp32.py --device "$DEVICE" --pairs-per-paradigm "$PAIRS" \
        --out-dir "$RESULTS"
}

attention() {
    local size=() dtype=bfloat16
    [[ -z ${ALL_N:-} ]] || size=(--n "$ALL_N")
    [[ $DEVICE == cuda* ]] || dtype=float32 # a CPU without native bf16 crawls through it
    run attention.log "$PY" bench/attention_gpu.py --device "$DEVICE" --dtype "$dtype" \
        "${size[@]}" --out-dir "$RESULTS"
}

variants() {
    local size=() only=() failed=0
    [[ -z ${ALL_N:-} ]] || size=(--n "$ALL_N")
    [[ -z ${BASELINE:-}${RESERVE:-}${EAGER:-}${PROFILE:-}${WARM:-} ]] || only=(--defaults-only)
    if [[ -n ${BASELINE:-} ]]; then
        PYTHONPATH="$BASELINE" run variants.log "$PY" bench/score_variants.py "${size[@]}" \
            "${only[@]}" --tag baseline --out-dir "$RESULTS" || return 1
    fi
    run variants.log "$PY" bench/score_variants.py "${size[@]}" "${only[@]}" \
        --out-dir "$RESULTS" || return 1
    if [[ -n ${RESERVE:-} ]]; then
        # Each allocator's warm-up in a process of its own; one failing leaves the other's run.
        run variants.log "$PY" bench/score_variants.py "${size[@]}" "${only[@]}" \
            --reserve --tag reserve --out-dir "$RESULTS" || failed=1
        run variants.log "$PY" bench/score_variants.py "${size[@]}" "${only[@]}" \
            --pin --tag pinned --out-dir "$RESULTS" || failed=1
    fi
    if [[ -n ${EAGER:-} ]]; then
        # CUDA 12 loads a kernel's module when the kernel is first launched, on the launching
        # thread; EAGER loads all of them as the process starts.
        CUDA_MODULE_LOADING=EAGER run variants.log "$PY" bench/score_variants.py "${size[@]}" \
            "${only[@]}" --tag eager-modules --out-dir "$RESULTS" || failed=1
    fi
    if [[ -n ${WARM:-} ]]; then
        # Tiny kernels launched for WARM seconds first: whether time and launches alone,
        # with none of the model's work, make the first call as fast as the last.
        run variants.log "$PY" bench/score_variants.py "${size[@]}" "${only[@]}" \
            --warm-seconds "$WARM" --tag warm-launches --out-dir "$RESULTS" || failed=1
    fi
    if [[ -n ${PROFILE:-} ]]; then
        # The default's three calls alone, each under torch's CPU profiler: which of the
        # launching thread's ops take longer in a first call than in the last.
        run variants.log "$PY" bench/score_variants.py "${size[@]}" --host-profile \
            --tag host-profile --out-dir "$RESULTS" || failed=1
    fi
    return "$failed"
}

kernel() {
    run kernel.log "$PY" bench/short_attention_gpu.py --out-dir "$RESULTS"
}

fusion() {
    local scale=()
    [[ $DEVICE == cuda* ]] || scale=(--scale 2000) # a CPU's dry run: a few dozen copies
    run fusion.log "$PY" bench/fusion_gpu.py --device "$DEVICE" "${scale[@]}" --out-dir "$RESULTS"
}

tokenize() {
    local size=()
    [[ -z ${ALL_N:-} ]] || size=(--n "$ALL_N")
    run tokenize.log "$PY" bench/tokenize_threads.py "${size[@]}" --out-dir "$RESULTS"
}

cuda_tests() {
    run cuda_tests.log "$PY" -m pytest -q -p no:cacheprovider -rs -k cuda \
        tests/test_runner.py tests/test_architectures.py tests/test_short_attention.py
}

# The markdown tables a step wrote, for the summary.
tables() {
    case $1 in
    sample) ls "$RESULTS"/*-sample.md ;;
    all) ls "$RESULTS"/*-all-default.md "$RESULTS"/*-all-sdpa.md ;;
    lm_eval) ls "$RESULTS"/lm_eval-phases-*.md && ls "$RESULTS"/lm_eval-imports.md ;;
    bf16) ls "$RESULTS"/bf16-vs-fp32-*.md ;;
    attention) ls "$RESULTS"/attention-gpu-*.md ;;
    kernel) ls "$RESULTS"/short-attention-gpu-*.md ;;
    fusion) ls "$RESULTS"/fusion-gpu-*.md ;;
    variants) ls "$RESULTS"/score-variants-*.md ;;
    tokenize) ls "$RESULTS"/tokenize-threads-*.md ;;
    esac 2>/dev/null || true
}

failed=0
pack
for step in "${STEPS[@]}"; do
    begin=$SECONDS
    if "$step"; then status=ok; else status=FAILED failed=1; fi
    {
        echo
        echo "## $step: $status, $((SECONDS - begin)) s"
        echo
        for table in $(tables "$step"); do
            cat "$table"
            echo
        done
        [[ $step != lm_eval ]] || grep -h "end to end\|this machine:" "$RESULTS/lm_eval.log" || true
        [[ $step != cuda_tests ]] || tail -n 5 "$RESULTS/cuda_tests.log" || true
        [[ $status == ok ]] || tail -n 20 "$RESULTS/$step"*.log || true
    } >>"$SUMMARY"
    pack
done
exit "$failed"
