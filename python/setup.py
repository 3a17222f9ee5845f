"""The zshard wheel: the Python package with libzshard, the daemons, the CLI
and the local launcher inside it, built by the project's own make.

    python -m build --wheel python        # from the repository's root
    auditwheel repair dist/zshard-*.whl   # bundles the shared libraries

make wheel does both (build/wheel/, tools/wheel.sh). ZSHARD_WHEEL_BUILD names the build
folder make uses (default: the repository's build/, so an up-to-date build
is reused). A wheel is built from the source tree only: an sdist without
the C sources could not build one.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
# the repository (tools/wheel.sh builds from a copy of python/, and says where)
ROOT = os.environ.get("ZSHARD_WHEEL_ROOT") or os.path.dirname(HERE)
PROGRAMS = ["zshard-coordinator", "zshard-server", "zshardctl"]


class NativeBuild(build_py):
    """Builds libzshard and the daemons with make, into zshard/_native."""

    def run(self):
        super().run()
        if not os.path.exists(os.path.join(ROOT, "Makefile")):
            raise SystemExit("zshard: the wheel builds from the source tree (no Makefile in %s); "
                             "run python -m build --wheel python from the repository" % ROOT)
        build = os.path.abspath(os.environ.get("ZSHARD_WHEEL_BUILD", os.path.join(ROOT, "build")))
        jobs = str(max(1, min(os.cpu_count() or 1, 8)))
        subprocess.check_call(["make", "-C", ROOT, "-j" + jobs, "BUILD=" + build, "native"])
        dest = os.path.join(self.build_lib, "zshard", "_native")
        os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
        shutil.copy2(os.path.join(build, "lib", "libzshard.so.0"), dest)
        for p in PROGRAMS:
            shutil.copy2(os.path.join(build, "bin", p), os.path.join(dest, "bin", p))
        shutil.copy2(os.path.join(ROOT, "deploy", "local", "zshard-local"),
                     os.path.join(dest, "bin", "zshard-local"))


class NativeWheel(bdist_wheel):
    """Not pure: the wheel carries machine code (py3-none-linux_x86_64,
    which auditwheel repair turns into a manylinux tag)."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True


def version():
    """zshard's one version: the repository's VERSION file."""
    with open(os.path.join(ROOT, "VERSION")) as f:
        return f.read().strip()


setup(version=version(), cmdclass={"build_py": NativeBuild, "bdist_wheel": NativeWheel},
      distclass=NativeDistribution)
