#!/bin/sh
# e2e: the real codex in both agent modes (tests/e2e/agents_real.sh).
exec bash "$(dirname "$0")/agents_real.sh" codex
