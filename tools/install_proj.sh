#!/bin/sh
# Installs the PROJ C library for shmloader's projections (Debian's pkg-config, libproj-dev and
# proj-data) with apt-get, as root or through sudo, saying first what it installs and which
# installed packages it upgrades: libproj-dev needs some libraries (curl's among them) at the
# versions Debian built it with, so apt-get may upgrade those to match. Nothing else changes.
set -eu
pkgs="pkg-config libproj-dev proj-data"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -qq
plan=$(LC_ALL=C apt-get -s install $pkgs 2>/dev/null | grep '^Inst ' || true)
# "Inst NAME (VERSION ...)" is a new package, "Inst NAME [OLD] (NEW ...)" an upgrade.
new=$(printf '%s\n' "$plan" | awk 'NF && $3 !~ /^\[/ {printf "%s ", $2}')
upgraded=$(printf '%s\n' "$plan" | awk '$3 ~ /^\[/ {gsub(/[][(]/, ""); printf "%s%s %s -> %s", sep, $2, $3, $4; sep = ", "}')
echo "installing PROJ ($pkgs) with apt-get:"
echo "  new packages: ${new:-none}"
echo "  installed packages upgraded to the versions libproj-dev needs: ${upgraded:-none}"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $pkgs
