#!/usr/bin/env bash
# The CUDA checks a session runs when it is lent a GPU, in one go (device time is
# short): the CuPy tests (generated fused kernels against the NumPy runner, the VM on
# cuda), every ONNX conformance case on CUDA, then the kernel tables (fused, norm and
# window kernels, generated vs step-by-step) and whole-model
# timings. Needs CuPy and a device; the
# packages come from that machine's image, hetvm from this checkout (no install).
# Writes its logs to $OUT (the device tool's folder) or ./gpu-check.
#
#     bash tools/gpu_check.sh            # tests + fused-kernel table (~2 min)
#     bash tools/gpu_check.sh --light --models   # also the light CNNs and every corpus model, cuda vs cpu
# The steps stop at 150 + 120 + 300 s: give the device run a limit of 600 s.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-check}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/gpu.txt"
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" 2>&1 | tee -a "$out/gpu.txt"
# each step has its own time limit, so one that hangs leaves the others their time
# (device time is short); what a step printed before its limit is kept in $out
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs \
    tests/kernels/test_codegen_cuda.py tests/kernels/test_codegen_cuda_norm.py \
    tests/kernels/test_codegen_cuda_window.py tests/runtime/test_runtime_cuda.py 2>&1 | tee "$out/tests.txt"
HETVM_CONFORMANCE=full timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 -k cuda \
    tests/onnx_backend/test_conformance.py 2>&1 | tail -40 | tee "$out/conformance.txt"
timeout 300 python3 benchmarks/cuda_fused.py "$@" 2>&1 | tee "$out/bench.txt"
