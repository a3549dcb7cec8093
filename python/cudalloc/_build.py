"""The version, and where the cudalloc tree is from this package's folder.
make install and setup.py write their own copy of this file; this one serves
a checkout (PYTHONPATH=python), whose tree is build/ (_native._roots)."""
import os

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "VERSION")) as _f:
    version = _f.readline().strip()
root = None
