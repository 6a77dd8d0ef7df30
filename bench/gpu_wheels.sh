#!/usr/bin/env bash
# Download, here (where PyPI is reachable), the wheels that bench/gpu.sh installs on a GPU
# machine without network access (Python 3.12, x86-64, torch already there): lm-eval and
# what it needs that the device's image lacks, hatchling to install this repository there,
# pytest for the CUDA tests, and for minicons the transformers<5 it needs. Ours uses the
# image's transformers 5.17.0, tokenizers 0.23.2 and huggingface_hub 1.33.0 (the device
# tool's KINDS.md): the versions we test with (transformers 5.23, huggingface_hub 2.4,
# which needs httpx2, not in the image) would add 18 MB to a carry of at most 64 MiB.
# About 28 MB in all.
#
#   bash bench/gpu_wheels.sh [DIR]        # default DIR: .whl (git-ignored)
#
# PYTHON_VERSION (default 3.12, the device's) picks the interpreter the wheels are for; only
# a dry run of gpu.sh on another python (3.11 here) sets it.
#
# nltk, which some of lm-eval's tasks import, is left out: no step imports it, and with the
# shipped 6 x 384 pll-demo the tree and all these wheels are already just over the 64 MiB a
# call carries (bench/README.md, "What travels": bench/demo_weights.sh, or .whl/pll alone).
#
# Pure-Python packages that PyPI has as source only (sqlitedict, word2number, rouge-score)
# are built into wheels here.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-.whl}"
rm -rf "$DIR/pll" "$DIR/minicons"
mkdir -p "$DIR/pll" "$DIR/minicons"

download() {
    local target=$1
    shift
    python3 -m pip download -q --no-deps --only-binary=:all: \
        --python-version "${PYTHON_VERSION:-3.12}" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$target" "$@"
}

python3 -m pip wheel -q --no-deps -w "$DIR/pll" sqlitedict==2.1.0 word2number==1.1 \
    rouge_score==0.1.2
download "$DIR/pll" lm_eval==0.4.13 datasets==5.2.0 evaluate==0.4.6 dill==0.4.1 \
    multiprocess==0.70.19 more-itertools==11.2.1 defusedxml==0.7.1 \
    pytablewriter==1.2.1 DataProperty==1.1.1 mbstrdecoder==1.1.5 pathvalidate==3.3.1 \
    tabledata==1.3.5 tcolorpy==0.1.7 typepy==1.3.5 pytz==2026.6 chardet==6.0.0.post1 \
    hatchling==1.33.0 tomlkit==0.15.2 trove-classifiers==2026.9.21.13 \
    pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1
download "$DIR/minicons" minicons==0.3.39 wonderwords==3.0.1 "transformers==4.57.6" \
    "tokenizers==0.22.1" "huggingface_hub==0.36.0"
du -sh "$DIR"
