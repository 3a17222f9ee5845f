"""python -m zshard.launch [ARGS]: zshard-local ARGS (a local cluster on this
machine; see zshard-local --help). With no arguments: zshard-local start, a
coordinator and 3 servers in the default folder, which torchrun's ranks and
zshardctl then find with no other set-up."""
import sys

from zshard._cli import local

if __name__ == "__main__":
    if len(sys.argv) == 1:
        sys.argv.append("start")
    local()
