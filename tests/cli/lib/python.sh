# Debian's python3 for the tests' references and generators: scripts/deps.sh
# installs their modules (python3-redis) for it, and a python3 shim earlier on
# PATH (pyenv's runs several processes) can cost half a second a start, which
# the hundreds of reference runs turn into minutes.  Sourced by common.sh,
# expect.sh and the Redis backend's lib.sh.
if [ -x /usr/bin/python3 ]; then
    python3() { /usr/bin/python3 "$@"; }
    export -f python3
fi
