#!/usr/bin/env bash
# Builds the project's container images from their Containerfiles with buildah (no daemon) and saves
# each as an OCI archive under $SUNK_IMAGES, which up.sh imports into every Node's containerd.
#
# Nothing is pulled: the Debian bases the Containerfiles start FROM are imported from debootstrap'd
# roots (trixie; forky for Slurm 26.05) under the tags the Containerfiles name, so the same files
# build for a user with any OCI builder and a registry. An image is rebuilt only when its inputs
# (Containerfile, build context, base image) change.
#
#   build-images.sh            every image
#   build-images.sh sunk       only the sunk image (after the host binary was rebuilt)
set -euo pipefail
source "$(dirname "$0")/env.sh"
mkdir -p "$SUNK_IMAGES"

buildah() {
  command buildah --root "$SUNK_MACHINE_CACHE/buildah/storage" --runroot "$SUNK_MACHINE_CACHE/buildah/run" \
    --storage-driver overlay "$@"
}

# --- the Debian bases -----------------------------------------------------------------------------
# debian_root SUITE: a minimal debootstrap'd SUITE root under the machine cache, keyed by this
# function's own text; prints its path.
debian_root() {
  local suite=$1
  local base_root
  base_root=$SUNK_MACHINE_CACHE/debian-root/$suite-$(declare -f debian_root | key_of /dev/stdin -- "$suite")
  if [[ ! -f $base_root/.sunk-complete ]]; then
    log "debootstrap a minimal $suite root for the base image"
    rm -rf --one-file-system "$SUNK_MACHINE_CACHE/debian-root/$suite"-* && mkdir -p "$base_root"
    debootstrap --variant=minbase "$suite" "$base_root" "$DEBIAN_MIRROR" "$(debootstrap_script "$suite")" \
      >"$SUNK_CACHE/debootstrap-base-$suite.log" 2>&1 \
      || { tail -20 "$SUNK_CACHE/debootstrap-base-$suite.log" >&2; die "debootstrap of the $suite base image failed"; }
    # What debian:<suite>-slim leaves out: apt caches, docs, and the mirror's package lists.
    rm -rf "$base_root"/var/cache/apt/*.bin "$base_root"/var/lib/apt/lists/* "$base_root"/usr/share/doc/* \
      "$base_root"/usr/share/man/* "$base_root"/usr/share/locale/*
    # The package mirror this machine reaches may serve a frozen snapshot of a suite whose Release
    # file carries a Valid-Until (testing does), long past; apt would refuse it. This setting lives
    # only in the local stand-in for debian:<suite>-slim, never in a Containerfile users build.
    echo 'Acquire::Check-Valid-Until "false";' >"$base_root/etc/apt/apt.conf.d/99sunk-local-mirror"
    date -u +%s >"$base_root/.sunk-complete"
  fi
  echo "$base_root"
}

# import_base SUITE IMAGE: SUITE's root imported as IMAGE (e.g. trixie as debian:trixie-slim), again
# only when the root was remade.
import_base() {
  local suite=$1 image=$2
  local base_root stamp
  base_root=$(debian_root "$suite")
  stamp=$base_root/.sunk-complete
  local id
  id=$(cat "$stamp")
  if [[ "$(buildah inspect --type image --format '{{index .ImageAnnotations "dev.sunk.base-root"}}' "$image" 2>/dev/null)" == "$id" ]]; then
    return
  fi
  log "importing the $suite root as $image"
  local container mount
  container=$(buildah from scratch)
  mount=$(buildah mount "$container")
  tar -C "$base_root" --exclude=./.sunk-complete -cf - . | tar -C "$mount" -xf -
  buildah umount "$container" >/dev/null
  buildah config --cmd bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --annotation "dev.sunk.base-root=$id" "$container"
  buildah commit -q --rm "$container" "$image" >/dev/null
}

# build NAME TAG CONTEXT CONTAINERFILE [TARGET] [BASE]: builds TAG on BASE (default the trixie base)
# unless its inputs are unchanged, then writes $SUNK_IMAGES/NAME.tar (NAME may name a folder).
build() {
  local name=$1 tag=$2 context=$3 containerfile=$4 target=${5:-} base=${6:-$DEBIAN_IMAGE}
  local archive=$SUNK_IMAGES/$name.tar stamp=$SUNK_IMAGES/$name.inputs inputs
  mkdir -p "$(dirname "$archive")"
  inputs=$( (
    echo "$tag $target $base"
    buildah inspect --type image --format '{{.FromImageID}}' "$base"
    cat "$containerfile"
    # Relative paths: the same context in another clone is the same input.
    cd "$context" && find . -maxdepth 1 -type f -print0 | sort -z | xargs -0 sha256sum
  ) | sha256sum | cut -d' ' -f1)
  if [[ -f $archive && -f $stamp && "$(cat "$stamp")" == "$inputs" ]]; then
    log "image $tag: cached"
    return
  fi
  log "building image $tag"
  buildah bud -q --layers --isolation chroot --build-arg "DEBIAN_IMAGE=$base" ${target:+--target "$target"} \
    -f "$containerfile" -t "$tag" "$context" >"$SUNK_CACHE/build-${name//\//-}.log" 2>&1 \
    || { tail -30 "$SUNK_CACHE/build-${name//\//-}.log"; die "building $tag failed"; }
  rm -f "$archive"
  buildah push -q "$tag" "oci-archive:$archive:$tag" >/dev/null
  echo "$inputs" >"$stamp"
}

# The host image's context: the binary, stripped of debug info. The debug build is what tests run;
# SUNK_HOST_PROFILE=release builds the image from the release build, as users get it (what the scale
# benchmark measures).
sunk_context=$SUNK_CACHE/sunk-image-context
stage_sunk_binary() {
  local binary=$SUNK_ROOT/target/${SUNK_HOST_PROFILE:-debug}/sunk
  [[ -x $binary ]] || die "$binary is missing: cargo build -p sunk${SUNK_HOST_PROFILE:+ --profile $SUNK_HOST_PROFILE} first"
  mkdir -p "$sunk_context"
  local staged_from="$binary $(stat -c %Y "$binary")"
  if [[ ! -f $sunk_context/sunk || "$(cat "$sunk_context/sunk.from" 2>/dev/null)" != "$staged_from" ]]; then
    objcopy --strip-debug "$binary" "$sunk_context/sunk.tmp" && mv "$sunk_context/sunk.tmp" "$sunk_context/sunk"
    echo "$staged_from" >"$sunk_context/sunk.from"
  fi
}

images=$SUNK_ROOT/images
want=${1:-all}
import_base trixie "$DEBIAN_IMAGE"
if [[ $want == all ]]; then
  [[ $SLURM_BASE_IMAGE == "$DEBIAN_IMAGE" ]] || import_base "$SLURM_SUITE" "$SLURM_BASE_IMAGE"
  build pause "$PAUSE_IMAGE" "$images/pause" "$images/pause/Containerfile"
  build busybox "$BUSYBOX_IMAGE" "$images/busybox" "$images/busybox/Containerfile"
  build mariadb "$MARIADB_IMAGE" "$images/mariadb" "$images/mariadb/Containerfile"
  build openldap "$OPENLDAP_IMAGE" "$images/openldap" "$images/openldap/Containerfile"
  for daemon in slurmd slurmctld slurmrestd slurmdbd login; do
    build "slurm-$SLURM_VERSION/$daemon" "$SLURM_IMAGE_REPO/$daemon:$SLURM_VERSION" "$images/slurm" \
      "$images/slurm/Containerfile" "$daemon" "$SLURM_BASE_IMAGE"
  done
fi
if [[ $want == all || $want == sunk ]]; then
  stage_sunk_binary
  build sunk "$SUNK_IMAGE" "$sunk_context" "$images/sunk/Containerfile"
fi
