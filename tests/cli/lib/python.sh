# Debian's python3 for the tests' references and generators: scripts/deps.sh
# installs their modules (python3-redis) for it, and a python3 shim earlier on
# PATH (pyenv's runs several processes) can cost half a second a start, which
# the hundreds of reference runs turn into minutes.  A directory holding a
# link to it goes first on PATH (a shell function would not do: `python3 &`
# would give $! of a subshell, and killing that leaves python running).
# Sourced by common.sh, expect.sh, calc.sh and the Redis backend's lib.sh.
if [ -x /usr/bin/python3 ]; then
    PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")/syspython" && pwd):$PATH"
    export PATH
fi
