#!/bin/sh
# sql2c.sh FILE NAME: print FILE as a C string constant `const char NAME[]'.
set -eu
printf '/* Generated from %s by sql2c.sh; do not edit. */\n' "$(basename "$1")"
printf 'const char %s[] =\n' "$2"
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$/\\n"/' "$1"
printf ';\n'
