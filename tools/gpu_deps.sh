#!/usr/bin/env bash
# gpu_deps.sh: run here, before a session's first call to a lent GPU machine. Downloads the
# Debian packages that machine's image lacks and the GPU checks need (MPFR and GMP for the
# reference, Criterion and the libraries it loads) into .gpudeps/ (ignored by git, 3.6 MiB),
# for the call to carry; tools/gpu_run.sh unpacks them there. See docs/kernels-cuda.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpudeps
cd .gpudeps
apt-get download libmpfr6 libmpfr-dev libgmp10 libgmp-dev libcriterion3 libcriterion-dev \
    libnanomsg5 libgit2-1.5 libmbedtls14 libmbedcrypto7 libmbedx509-1 libhttp-parser2.9 libssh2-1
ls -l
