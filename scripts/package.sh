#!/bin/sh
# The project's package command (README "Quick start", the install row):
# installs the Debian packages the build needs when missing (.ci/deps.sh
# package: the run command's compilers and libraries, file for cpack),
# builds what the packages hold - the libraries,
# pcached, pcachectl, pcache-snapshot, the man pages; no tests, no
# benchmarks - in an optimised tree of its own (build-pkg/, so the other
# trees' options are left alone), and makes the Debian packages there
# (cpack -G DEB, cmake/PcachePackage.cmake). Then, as the README says:
#   apt-get install ./build-pkg/pcache-server_*.deb ./build-pkg/pcache-tools_*.deb
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/.ci/deps.sh" package
build="$root/build-pkg"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DPCACHE_TESTS=OFF -DPCACHE_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)"
# the packages of an older version would match the README's globs too
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB)
# every package that ships a program ships its man page (cmake/PcacheMan.cmake)
for p in pcache-server pcache-tools; do
    if ! dpkg-deb -c "$build/${p}_"*.deb | grep -q '/usr/share/man/'; then
        echo "package: $p has no man pages (cmake/PcacheMan.cmake)" >&2
        exit 1
    fi
done
echo "package: $(cd "$build" && ls ./*.deb | tr '\n' ' ')in $build"
echo "install: apt-get install ./build-pkg/pcache-server_*.deb ./build-pkg/pcache-tools_*.deb"
