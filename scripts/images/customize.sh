#!/usr/bin/env bash
# mmdebstrap's customize hook for scripts/images/build.sh:
#   customize.sh ROOTFS SITE_DIR SITE_PATH_IN_IMAGE RECIPE
set -euo pipefail
R=$1 SITE=$2 SITE_PATH=$3 RECIPE=$4
# shellcheck source=controller.conf
source "$RECIPE"
in_root() { chroot "$@"; }

# The packages: pip's console scripts point at the host's interpreter; the image's is /usr/bin/python3.
mkdir -p "$R/$SITE_PATH"
cp -a "$SITE"/. "$R/$SITE_PATH/"
if [[ -d $R/$SITE_PATH/bin ]]; then
  for s in "$R/$SITE_PATH"/bin/*; do
    head -c2 "$s" | grep -q '#!' || continue
    sed -i '1s|^#!.*python.*$|#!/usr/bin/python3|' "$s"
    install -m 0755 "$s" "$R/usr/local/bin/$(basename "$s")"
  done
  rm -rf "$R/$SITE_PATH/bin"
fi
# Byte-compiled by the image's own python3, checked by hash only (never against the source's
# time): nothing needs writing at run time, and a read-only root filesystem costs no start-up.
in_root "$R" python3 -m compileall -q --invalidation-mode unchecked-hash "/$SITE_PATH" >/dev/null

# The non-root user the image runs as.
echo "$IMAGE_USER_NAME:x:$IMAGE_USER:$IMAGE_USER:$IMAGE_USER_NAME:$IMAGE_HOME:/usr/sbin/nologin" >>"$R/etc/passwd"
echo "$IMAGE_USER_NAME:x:$IMAGE_USER:" >>"$R/etc/group"

rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/* "$R"/var/cache/debconf/*-old "$R"/var/log/* "$R"/root/.cache

# Checks that fail the build, not a deployment much later. The imports run as root with bytecode
# writing on, so a module without its precompiled bytecode would be written now, and found below:
# at run time (read-only root, PYTHONDONTWRITEBYTECODE) Python then never tries to write. The
# command runs as the image's user.
marker=$(mktemp "$R/tmp/.marker.XXXXXX")
sleep 1  # find -newer compares times at a second's resolution on some filesystems
in_root "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root python3 -c "import importlib, sys
for m in sys.argv[1:]:
    importlib.import_module(m)
print('imports ok:', ' '.join(sys.argv[1:]))" $CHECK_IMPORTS
# shellcheck disable=SC2086
in_root --userspec="$IMAGE_USER:$IMAGE_USER" "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$IMAGE_HOME" $CHECK_COMMAND >/dev/null
written=$(find "$R" -xdev -newer "$marker" ! -path "$R/proc/*" ! -path "$R/dev/*" ! -path "$R/sys/*" ! -path "$R/tmp" 2>/dev/null | sed "s|^$R||")
rm -f "$marker"
if [[ -n $written ]]; then
  echo "starting the image's Python wrote under / (bytecode not precompiled?); a read-only root filesystem refuses that:" >&2
  echo "$written" | head -20 >&2
  exit 1
fi
