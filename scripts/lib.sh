# Shared set-up for scripts/test and scripts/bench: finds the Pythons to use
# and gives each a virtualenv with zloopgo built in place. Sourced, not run.

# The default python3 and the newest CPython pyenv has (if it differs).
zl_pythons() {
    local default newest root
    default=$(command -v python3)
    echo "$default"
    if command -v pyenv >/dev/null 2>&1; then
        root=$(pyenv root)
        newest=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$' | sort -V | tail -n 1)
        if [ -n "$newest" ] && [ -x "$root/versions/$newest/bin/python3" ]; then
            if [ "$("$root/versions/$newest/bin/python3" -c 'import sys; print(sys.version)')" != "$("$default" -c 'import sys; print(sys.version)')" ]; then
                echo "$root/versions/$newest/bin/python3"
            fi
        fi
    fi
}

# zl_venv PYTHON PACKAGES...: prints the path of a virtualenv for PYTHON
# (.venv-X.Y in the checkout) with zloopgo installed editable and PACKAGES
# from PyPI.
zl_venv() {
    local py=$1; shift
    local ver dir
    ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    dir=".venv-$ver"
    if [ ! -x "$dir/bin/python" ]; then
        "$py" -m venv "$dir" >&2
    fi
    "$dir/bin/python" -m pip install -q --upgrade pip >&2
    "$dir/bin/python" -m pip install -q -e . "$@" >&2
    echo "$dir"
}
