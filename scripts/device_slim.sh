#!/usr/bin/env bash
# The working tree a device call carries is limited to 64 MiB, and the tracked tree passed it in
# session 51 (69 MiB); session 52 dropped two superseded files (the tree is ~55 MiB now), so this is
# needed again only when the tree grows past the limit. No device command reads the big historical
# stores below, so before a call move them out of the working tree, and put them back after (git
# status shows them deleted in between: never commit then).
#   bash scripts/device_slim.sh out    # before the device call
#   bash scripts/device_slim.sh back   # after it
set -euo pipefail
cd "$(dirname "$0")/.."
ASIDE=${GEMMTUNE_ASIDE:-/tmp/gemmtune-aside}
FILES="data/collect/collect.sqlite.gz data/collect/h100/collect.sqlite.gz"
case "${1:-}" in
  out) for f in $FILES; do if [ -f "$f" ]; then mkdir -p "$ASIDE/$(dirname "$f")"; mv "$f" "$ASIDE/$f"; fi; done ;;
  back) for f in $FILES; do if [ -f "$ASIDE/$f" ]; then mv "$ASIDE/$f" "$f"; fi; done ;;
  *) echo "usage: $0 out|back" >&2; exit 2 ;;
esac
git status --short -- $FILES | head -8
