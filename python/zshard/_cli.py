"""The commands a wheel puts on PATH (zshard-coordinator, zshard-server,
zshardctl, zshard-local): each runs the program the wheel carries in
zshard/_native/bin, with the arguments it was given. From a source tree,
which carries none, they run the build's (build/bin, or $ZSHARD_BIN)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def bindir() -> str:
    """Where the daemons and the CLI are: $ZSHARD_BIN, else the wheel's,
    else the source tree's build."""
    env = os.environ.get("ZSHARD_BIN")
    if env:
        return env
    native = os.path.join(HERE, "_native", "bin")
    if os.path.isdir(native):
        return native
    return os.path.join(HERE, "..", "..", "build", "bin")


def _exec(name: str) -> None:
    path = os.path.join(bindir(), name)
    if not os.access(path, os.X_OK):
        sys.stderr.write("%s: not found at %s (a zshard wheel carries it; from a source "
                         "tree run make, or set ZSHARD_BIN)\n" % (name, path))
        sys.exit(127)
    env = dict(os.environ)
    env.setdefault("ZSHARD_BIN", bindir())  # zshard-local starts the same daemons
    if name == "zshard-local":
        os.execve("/bin/bash", ["zshard-local", path] + sys.argv[1:], env)
    os.execve(path, [name] + sys.argv[1:], env)


def coordinator() -> None:
    _exec("zshard-coordinator")


def server() -> None:
    _exec("zshard-server")


def zshardctl() -> None:
    _exec("zshardctl")


def local() -> None:
    _exec("zshard-local")
