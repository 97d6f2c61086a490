#!/bin/sh
# Installs the PROJ C library for shmloader's projections (Debian's pkg-config, libproj-dev and
# proj-data) with apt-get, as root or through sudo, saying first what it installs and which
# installed packages it upgrades: libproj-dev needs some libraries (curl's among them) at the
# versions Debian built it with, so apt-get may upgrade those to match. Nothing else changes.
#
# `install_proj.sh --explain FILE` only prints that summary of FILE, an `apt-get -s install`
# output (python/tests/tools/test_install_proj.py checks it on a recorded one).
set -eu
pkgs="pkg-config libproj-dev proj-data"

# explain prints what an `apt-get -s install` plan (on stdin) installs and upgrades:
# "Inst NAME (VERSION ...)" is a new package, "Inst NAME [OLD] (NEW ...)" an upgrade.
explain() {
	plan=$(grep '^Inst ' || true)
	new=$(printf '%s\n' "$plan" | awk 'NF && $3 !~ /^\[/ {printf "%s%s", sep, $2; sep = " "}')
	upgraded=$(printf '%s\n' "$plan" | awk '$3 ~ /^\[/ {gsub(/[][(]/, ""); printf "%s%s %s -> %s", sep, $2, $3, $4; sep = ", "}')
	echo "installing PROJ ($pkgs) with apt-get:"
	echo "  new packages: ${new:-none}"
	echo "  installed packages upgraded to the versions libproj-dev needs: ${upgraded:-none}"
}

if [ "${1:-}" = --explain ]; then
	explain < "$2"
	exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -qq
LC_ALL=C apt-get -s install $pkgs 2>/dev/null | explain
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $pkgs
