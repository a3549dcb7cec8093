"""The version comes from the tree's VERSION file, the one every cudalloc
program reports; the installed package carries it in cudalloc/_build.py."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "VERSION")) as f:
    VERSION = f.readline().strip()


class BuildPy(build_py):
    def run(self):
        super().run()
        with open(os.path.join(self.build_lib, "cudalloc", "_build.py"), "w") as f:
            f.write('"""Written by setup.py: the version; the cudalloc tree is the launcher on PATH\'s."""\n'
                    "version = %r\nroot = None\n" % VERSION)


setup(version=VERSION, cmdclass={"build_py": BuildPy})
