#!/usr/bin/env bash
# The GPU check: one command, on a machine with an NVIDIA GPU, that
#   1. installs the `cuda` extra (pycuda, built from source against the local toolkit),
#   2. runs the GPU-marked tests (kernels, runtime, zoo artifacts on the device),
#   3. runs the ONNX node suite's eligible tests on the GPU,
#   4. compiles the zoo and the torch-exported models for this GPU's `cuda:` target,
#      validates each against onnxruntime and times it against PyTorch eager and
#      torch.compile on the same device, and measures the memory-bound kernels'
#      bandwidth against a device-to-device copy,
# and prints one table (compiler/bench/gpu_check.py). Results land in $GPU_CHECK_OUT
# (default: gpu-check/ in the repository), the pycuda wheel among them for reuse.
#
# Offline machines: put the pycuda sdist and the wheels of its pure-Python needs
# (pytools, platformdirs, mako, siphash24) in .gpu/ beforehand, e.g.
#   pip download --no-deps --no-binary pycuda pycuda -d .gpu
#   pip download --no-deps --only-binary=:all: --python-version 3.12 ... pytools platformdirs mako siphash24 -d .gpu
# A prebuilt pycuda wheel in .gpu/ is used instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
OUTDIR=${GPU_CHECK_OUT:-$ROOT/gpu-check}
SITE=${GPU_CHECK_SITE:-/tmp/tileforge-gpu-site}
WHEELS=$ROOT/.gpu
mkdir -p "$OUTDIR" "$SITE" "$WHEELS"
export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$NVCC" ] || { echo "gpu_check: nvcc not found (the CUDA toolkit is needed)" >&2; exit 2; }
export PATH="$(dirname "$NVCC"):$PATH"
CUDA_ROOT=$(cd "$(dirname "$NVCC")/.." && pwd)
export CUDA_HOME=${CUDA_HOME:-$CUDA_ROOT}  # where tileforge's builds find nvcc

install_pycuda() {
    if "$PY" -c "import pycuda.driver" 2>/dev/null; then return; fi
    local wheel
    wheel=$(ls "$WHEELS"/pycuda-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$wheel" ]; then
        # pycuda links against the driver library libcuda.so: find the driver's copy.
        local drvdir=/tmp/tileforge-libcuda lib
        lib=$(ldconfig -p | awk '/libcuda\.so(\.1)? /{print $NF; exit}')
        [ -n "$lib" ] || lib=$(ls "$CUDA_ROOT"/lib64/stubs/libcuda.so 2>/dev/null || true)
        [ -n "$lib" ] || { echo "gpu_check: no libcuda.so (NVIDIA driver) found" >&2; exit 2; }
        mkdir -p "$drvdir" && ln -sf "$lib" "$drvdir/libcuda.so"
        local src=/tmp/tileforge-pycuda-src
        rm -rf "$src" && mkdir -p "$src"
        tar xzf "$(ls "$WHEELS"/pycuda-*.tar.gz | head -1)" -C "$src" --strip-components=1
        (cd "$src" && "$PY" configure.py --cuda-root="$CUDA_ROOT" --no-cuda-enable-curand \
            --cudadrv-lib-dir="$drvdir,$CUDA_ROOT/lib64,$CUDA_ROOT/lib64/stubs" >/dev/null &&
         "$PY" -m pip wheel -q --no-index --no-deps --no-build-isolation -w "$WHEELS" .)
        wheel=$(ls "$WHEELS"/pycuda-*.whl | head -1)
        cp "$wheel" "$OUTDIR/"
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
        "$wheel" $(ls "$WHEELS"/{pytools,platformdirs,mako,siphash24}-*.whl 2>/dev/null || true)
}

t0=$SECONDS
install_pycuda
echo "gpu_check: pycuda ready after $((SECONDS - t0)) s"
"$PY" -m compiler.bench.gpu_check --out "$OUTDIR" "$@"
