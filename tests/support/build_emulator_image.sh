#!/usr/bin/env bash
# Build the DynamoDB emulator's image locally, without any image registry:
# a minimal Debian root file system (mmdebstrap or debootstrap, from the mirror
# apt already uses), the pinned ministack wheels built on this machine and installed offline
# inside it, then `docker import`. Needs root (debootstrap, chroot) and a
# Docker engine. `make emulator-image` calls it.
#
# Cached twice: an image already present in the engine is kept (a few ms), and
# the root file system tarball under $CACHE is re-imported when the engine's
# data was wiped (seconds instead of minutes).
#
# Settings (environment): LEDGER_TEST_EMULATOR_IMAGE (the tag, default the
# published name at the pinned version), MINISTACK_VERSION, EMULATOR_DEBIAN_SUITE,
# EMULATOR_DEBIAN_MIRROR (default: the first mirror in apt's sources),
# EMULATOR_IMAGE_CACHE, PYTHON (a Python 3.11 that builds the wheels).
set -euo pipefail

VERSION=${MINISTACK_VERSION:-1.5.33}
IMAGE=${LEDGER_TEST_EMULATOR_IMAGE:-ministackorg/ministack:$VERSION}
SUITE=${EMULATOR_DEBIAN_SUITE:-bookworm}
CACHE=${EMULATOR_IMAGE_CACHE:-var/cache/emulator-image}
PYTHON=${PYTHON:-python3}
TARBALL="$CACHE/ministack-$VERSION-$SUITE-rootfs.tar"

say() { echo "emulator-image: $*"; }
die() { echo "emulator-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "the docker client is not installed"
docker info >/dev/null 2>&1 || die "no Docker engine answers (start dockerd or set DOCKER_HOST)"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    say "$IMAGE is present"
    exit 0
fi

apt_mirror() {
    # The first Debian mirror apt uses (deb822 sources, then one-line sources).
    local uri
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -v -- '-security' | head -n 1 || true)
    if [ -z "$uri" ]; then
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n 1 || true)
    fi
    echo "$uri"
}

if [ ! -s "$TARBALL" ]; then
    [ "$(id -u)" = 0 ] || die "building the root file system needs root (debootstrap, chroot)"
    command -v mmdebstrap >/dev/null || command -v debootstrap >/dev/null \
        || die "neither mmdebstrap nor debootstrap is installed (apt-get install mmdebstrap)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
        || die "PYTHON=$PYTHON is not Python 3.11 (the wheels must match $SUITE's python3)"
    MIRROR=${EMULATOR_DEBIAN_MIRROR:-$(apt_mirror)}
    [ -n "$MIRROR" ] || die "no Debian mirror found in apt's sources: set EMULATOR_DEBIAN_MIRROR"
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    ROOTFS="$WORK/rootfs"
    # mmdebstrap when present (faster: parallel downloads, one dpkg run), else debootstrap.
    if command -v mmdebstrap >/dev/null; then
        say "mmdebstrap $SUITE (essential + python3)"
        mmdebstrap --mode=root --variant=essential --include=python3,python3-venv \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/bootstrap.log" 2>&1 \
            || { tail -n 20 "$WORK/bootstrap.log" >&2; die "mmdebstrap failed"; }
    else
        say "debootstrap $SUITE (minbase + python3)"
        debootstrap --variant=minbase --include=python3,python3-venv \
            "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/bootstrap.log" 2>&1 \
            || { tail -n 20 "$WORK/bootstrap.log" >&2; die "debootstrap failed"; }
    fi
    say "wheels for ministack==$VERSION"
    mkdir -p "$ROOTFS/opt/wheels"
    "$PYTHON" -m pip wheel --quiet "ministack==$VERSION" -w "$ROOTFS/opt/wheels" 2>&1 \
        | { grep -v '^WARNING: Location' || true; }
    say "installing them offline in the image"
    in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$ROOTFS" "$@"; }
    in_root /usr/bin/python3 -m venv /opt/ministack
    in_root /opt/ministack/bin/pip install --quiet --no-index --find-links /opt/wheels \
        "ministack==$VERSION"
    in_root /opt/ministack/bin/python -c 'import ministack' || die "ministack does not import in the image"
    rm -rf "$ROOTFS/opt/wheels" "$ROOTFS"/usr/share/{doc,man,info,locale} \
        "$ROOTFS"/var/cache/apt/* "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/root/.cache
    mkdir -p "$CACHE"
    tar -C "$ROOTFS" -cf "$TARBALL.partial" .
    mv "$TARBALL.partial" "$TARBALL"
fi

say "importing $TARBALL as $IMAGE"
docker import \
    --change 'ENV PATH=/opt/ministack/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV GATEWAY_PORT=4566' \
    --change 'ENV BIND_HOST=0.0.0.0' \
    --change 'EXPOSE 4566' \
    --change 'CMD ["ministack"]' \
    "$TARBALL" "$IMAGE" >/dev/null
say "$IMAGE built ($(docker image inspect --format '{{.Size}}' "$IMAGE") bytes)"
