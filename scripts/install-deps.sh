#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the tools need.
# Idempotent: packages already present are left alone; apt-get runs only when
# something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang libomp-dev
  libprotobuf-c-dev protobuf-c-compiler
  libonnx-dev libonnx-testdata
  libfyaml-dev libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libdnnl-dev
  libgrpc-dev protobuf-compiler python3-grpcio python3-protobuf python3-grpc-tools zlib1g-dev
  libssl-dev libsqlite3-dev libseccomp-dev libgnutls28-dev
  python3 python3-numpy python3-onnx python3-jsonschema python3-requests python3-yaml python3-torch python3-sklearn
  prometheus git libopenblas0-pthread curl
  chromium chromium-driver python3-selenium python3-jwt python3-cryptography
)
# npm fetches llama.cpp's source (tools/fetch-llama-cpp.sh); a Node.js that
# already brings npm is kept.
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
