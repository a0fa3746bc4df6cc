#!/usr/bin/env bash
# setup.sh — install the Debian packages ctrain needs, when missing:
# a C toolchain, zlib (gzip), stb_image, libjpeg-turbo (the libjpeg API:
# DCT scaling and scanline cropping), the Fashion-MNIST data set,
# the fortunes text corpus (BERT pre-training and the classification task)
# and matplotlib for the system's python3 (`ctrain report --plots`; ctrain
# report finds it under /usr/bin/python3 when the python3 on PATH lacks it).
set -euo pipefail
need=()
for p in build-essential zlib1g-dev libstb-dev dataset-fashion-mnist fortunes python3-matplotlib; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
# by its header: Ubuntu names the same library libjpeg-turbo8-dev
[ -e /usr/include/jpeglib.h ] || need+=(libjpeg62-turbo-dev)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
echo "setup: installing ${need[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
