"""Build of the fplab package: the C library first (the repository's Makefile: libfplab.so), then
the extension fplab._fplab linked against it, with libfplab.so.MAJOR shipped beside it (RPATH
$ORIGIN). The version is the Makefile's VERSION, the one place it is written.

Environment:
  FPLAB_MAKE_ARGS  make variables for the C library (default "NO_CUDA=1 ARCH=x86-64-v2": a
                   portable build that loads on any x86-64-v2 machine; "ARCH=native" for this
                   machine's AVX2/AVX-512 paths; drop NO_CUDA=1 to link the CUDA backend)
  FPLAB_BUILD_DIR  where the C library is built (default: under setuptools' build_temp); make
                   test points it at the dev build so nothing is compiled twice
"""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent  # the repository: its Makefile and the C sources


def makefile_version():
    m = re.search(r"^VERSION\s*:=\s*(\S+)\s*$", (ROOT / "Makefile").read_text(), re.M)
    if not m:
        raise RuntimeError(f"no 'VERSION := x.y.z' line in {ROOT / 'Makefile'}")
    return m.group(1)


VERSION = makefile_version()


class BuildWithLibrary(build_ext):
    def run(self):
        build_dir = Path(os.environ.get("FPLAB_BUILD_DIR") or Path(self.build_temp).resolve() / "clib").resolve()
        args = shlex.split(os.environ.get("FPLAB_MAKE_ARGS", "NO_CUDA=1 ARCH=x86-64-v2"))
        # A make above us (make test) must not hand its jobserver to this one through pip.
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        cmd = ["make", "--no-print-directory", "-C", str(ROOT), f"BUILD={build_dir}", f"-j{os.cpu_count() or 1}",
               *args, "lib"]
        print("fplab: building the C library:", " ".join(cmd), flush=True)
        subprocess.check_call(cmd, env=env)
        for ext in self.extensions:
            ext.library_dirs = [str(build_dir)]
        super().run()
        major = VERSION.split(".")[0]
        for ext in self.extensions:
            dest = Path(self.get_ext_fullpath(ext.name)).parent
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(build_dir / f"libfplab.so.{VERSION}", dest / f"libfplab.so.{major}")


def extension(name):
    return Extension(
        f"fplab.{name}",
        sources=[f"fplab/{name}.c"],
        include_dirs=[str(ROOT)],
        define_macros=[("FPLAB_VERSION", f'"{VERSION}"')],
        libraries=["fplab"],
        extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                            "-Wno-cast-function-type"],
        extra_link_args=["-Wl,-rpath,$ORIGIN"],
    )


# _fplab: formats, codes, scaled matmul on NumPy arrays; _autocast: policies for fplab.torch.
setup(version=VERSION, ext_modules=[extension("_fplab"), extension("_autocast")],
      cmdclass={"build_ext": BuildWithLibrary})
