#!/usr/bin/env bash
# mmdebstrap's customize hook for scripts/images/build.sh:
#   customize.sh ROOTFS SITE_DIR SITE_PATH_IN_IMAGE RECIPE
set -euo pipefail
R=$1 SITE=$2 SITE_PATH=$3 RECIPE=$4
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WITH_PACKAGE=1 IMAGE_ENV=() WRITABLE_PATHS=() CHECK_IMPORTS="" CHECK_COMMAND=""  # what a recipe may leave unset
# shellcheck source=controller.conf
source "$RECIPE"
in_root() { chroot "$@"; }

if ((WITH_PACKAGE)); then
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
  # The package's licence and notice where Debian keeps a package's (the wheel's .dist-info has them too).
  install -D -m 0644 -t "$R/usr/share/doc/airflow-t9k" "$ROOT/LICENSE" "$ROOT/NOTICE"
fi

# The non-root user the image runs as: its own uid, never one a Debian package created (a pod's
# runAsUser names it by number).
if grep -qE "^$IMAGE_USER_NAME:|^[^:]*:[^:]*:$IMAGE_USER:" "$R/etc/passwd"; then
  echo "the image's user $IMAGE_USER_NAME ($IMAGE_USER) clashes with one in its /etc/passwd:" >&2
  grep -E "^$IMAGE_USER_NAME:|^[^:]*:[^:]*:$IMAGE_USER:" "$R/etc/passwd" >&2
  exit 1
fi
echo "$IMAGE_USER_NAME:x:$IMAGE_USER:$IMAGE_USER:$IMAGE_USER_NAME:$IMAGE_HOME:/usr/sbin/nologin" >>"$R/etc/passwd"
echo "$IMAGE_USER_NAME:x:$IMAGE_USER:" >>"$R/etc/group"
# Directories a pod mounts writable volumes on (Airflow's home): there, empty and the user's, so
# the image also runs without a volume (with a writable root).
for d in "${WRITABLE_PATHS[@]}"; do
  install -d -m 0755 -o "$IMAGE_USER" -g "$IMAGE_USER" "$R$d"
done
if declare -F customize_rootfs >/dev/null; then
  customize_rootfs "$R"  # the recipe's own last touches
fi

rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/* "$R"/var/cache/debconf/*-old "$R"/var/log/* "$R"/root/.cache

# Checks that fail the build, not a deployment much later. The imports run as root with bytecode
# writing on, so a module without its precompiled bytecode would be written now, and found below:
# at run time (read-only root, PYTHONDONTWRITEBYTECODE) Python then never tries to write. The
# command runs as the image's user, with the image's environment. Only the writable paths may
# change (Airflow writes its airflow.cfg into its home on import); they are emptied afterwards, so
# nothing written by a check (a generated key in that airflow.cfg) stays in the image.
marker=$(mktemp "$R/tmp/.marker.XXXXXX")
sleep 1  # find -newer compares times at a second's resolution on some filesystems
check_env=(env -i PATH=/usr/local/bin:/usr/bin:/bin "${IMAGE_ENV[@]}")
if [[ -n $CHECK_IMPORTS ]]; then
  in_root "$R" "${check_env[@]}" HOME=/root python3 -c "import importlib, sys
for m in sys.argv[1:]:
    importlib.import_module(m)
print('imports ok:', ' '.join(sys.argv[1:]))" $CHECK_IMPORTS
fi
empty_writable() {
  local d
  for d in "${WRITABLE_PATHS[@]}"; do find "$R$d" -mindepth 1 -delete; done
}
empty_writable  # root wrote there; the user's command must start as a pod does, with nothing
if [[ -n $CHECK_COMMAND ]]; then
  # shellcheck disable=SC2086
  in_root --userspec="$IMAGE_USER:$IMAGE_USER" "$R" "${check_env[@]}" HOME="$IMAGE_HOME" $CHECK_COMMAND >/dev/null
fi
prune=(-path "$R/proc/*" -o -path "$R/dev/*" -o -path "$R/sys/*" -o -path "$R/tmp")
for d in "${WRITABLE_PATHS[@]}"; do prune+=(-o -path "$R$d" -o -path "$R$d/*"); done
written=$(find "$R" -xdev -newer "$marker" ! \( "${prune[@]}" \) 2>/dev/null | sed "s|^$R||")
rm -f "$marker"
if [[ -n $written ]]; then
  echo "starting the image's Python wrote under / (bytecode not precompiled?); a read-only root filesystem refuses that:" >&2
  echo "$written" | head -20 >&2
  exit 1
fi
empty_writable
find "$R/tmp" -mindepth 1 -delete
